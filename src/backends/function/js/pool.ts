/**
 * The node's pool of `js` child processes. Each child runs one call at a time and is reused
 * for many; `minProcesses` are kept warm, more are started while calls wait (up to
 * `maxProcesses`), and an idle one above the minimum ends after `idleTimeoutMs`. A child is
 * retired after `callsPerProcess` calls, so nothing a long series of calls leaves behind in a
 * process (caches, fragmentation) grows without bound.
 *
 * A child that dies takes only its own call with it (oom, crashed, or killed when the call was
 * cut) and is replaced. A child that dies before it is ready is a start failure: further starts
 * wait an exponential backoff, and when no child is left, waiting calls are rejected with
 * WARREN_ERR_BACKEND_UNAVAILABLE and new ones refused (with `retryAfterMs`) until the backoff
 * ends, so nothing waits on a pool that cannot serve it. Calls beyond `maxQueue` waiting are
 * refused with WARREN_ERR_OVERLOADED.
 *
 * Fairness between tenants: a call cannot be taken back from its process before its time
 * limit, so no tenant may run more than `tenantShare` calls at once (by default half the
 * processes, rounded up): whatever one tenant runs, another's call finds a process free. Waiting
 * calls go, as processes free up, to the tenant with the fewest running, in arrival order
 * among equals.
 */
import { createError, ErrorCodes, type WarrenError } from '../../../errors.js'
import { spawnJsChild, type JsChild, type JsHeapLimits } from './child.js'
import { causeOfDeath, describeExit, type ChildExit } from './exit-cause.js'
import type { JsJailOptions } from './jail.js'
import type { ChildMessage, JsRequest } from './protocol.js'

/** How the pool is built. */
export interface JsPoolOptions {
  minProcesses: number
  maxProcesses: number
  callsPerProcess: number
  /** A child not ready this long after it was started is killed and counted as a start failure. */
  startTimeoutMs: number
  idleTimeoutMs: number
  maxQueue: number
  /** Most calls of one tenant running at once. */
  tenantShare: number
  heap: JsHeapLimits
  /** How each child is confined (see jail.ts). */
  jail: JsJailOptions
  restartBackoffMs: number
  restartBackoffMaxMs: number
}

/** A call as the pool takes it: the request with an absolute deadline instead of a time limit. */
export type JsPoolRequest = Omit<JsRequest, 'timeoutMs'> & {
  /** `performance.now()` time at which the call's time is up; the child gets what is left. */
  deadline: number
  /** Whose call it is, for the share of processes each tenant may hold; a call of no tenant (a backend used on its own) is not held to a share. */
  tenant?: string
}

/** How a call handed to the pool ended. */
export type JsEnd =
  /** The child answered (its sandbox may have cut the evaluation at the deadline). */
  | { kind: 'done', exitCode: number, truncated: boolean, timedOut: boolean }
  /** The child died running it; 'killed' when `cancel()` (or close) killed it. */
  | { kind: 'died', reason: 'oom' | 'crashed' | 'killed', message: string }
  /** `cancel()` took it out of the queue before it ran. */
  | { kind: 'cancelled' }

/** One call handed to the pool. */
export interface JsTicket {
  /** Rejects only with a WarrenError, when the call never reached a child. */
  readonly result: Promise<JsEnd>
  /** True once a child has the call. */
  readonly started: boolean
  /** Dequeues the call, or kills the child running it (SIGKILL; the pool starts another). */
  cancel (): void
}

/** Where the pool stands. */
export interface JsPoolStatus {
  /** 'up': serving; 'down': no child and starts failing, waiting `retryAfterMs`; 'closed': for good. */
  state: 'up' | 'down' | 'closed'
  /** Live children (starting, idle or busy). */
  processes: number
  /** Children ready for a call. */
  idle: number
  /** Children running a call. */
  busy: number
  /** Calls waiting for a child. */
  queued: number
  /** Children that died before they were ready, since one last was. */
  consecutiveFailures: number
  retryAfterMs?: number
  lastFailure?: string
  /** Pids of the live children, for diagnostics and tests. */
  pids: number[]
}

/** The pool. */
export interface JsPool {
  /** Queues a call; `onOutput` gets its output chunks as the child writes them. */
  submit (request: JsPoolRequest, onOutput: (fd: 1 | 2, data: Uint8Array) => void): JsTicket
  status (): JsPoolStatus
  /** Refuses new calls, rejects waiting ones, kills every child and waits until they are gone. */
  close (): Promise<void>
}

interface Entry {
  id: number
  request: JsPoolRequest
  onOutput: (fd: 1 | 2, data: Uint8Array) => void
  slot?: Slot
  settled: boolean
  resolve: (end: JsEnd) => void
  reject: (err: WarrenError) => void
}

interface Slot {
  child: JsChild
  /** 'retiring': killed by the pool, not yet gone; never given a call again, no longer counts as capacity. */
  state: 'starting' | 'idle' | 'busy' | 'retiring'
  calls: number
  entry?: Entry
  /** While starting: kills a child that does not get ready. */
  startTimer?: NodeJS.Timeout
  /** Set when the start timer killed it. */
  startTimedOut?: boolean
  idleTimer?: NodeJS.Timeout
  /** Resolves once the process is gone. */
  gone: Promise<void>
}

/** Makes the pool and starts its warm children. */
export function createJsPool (options: JsPoolOptions): JsPool {
  const slots = new Set<Slot>()
  /** Idle children, most recently used last: calls go to warm ones, the rest can idle out. */
  const idle: Slot[] = []
  const queue: Entry[] = []
  /** Running calls per tenant (tenants with none are not kept). */
  const running = new Map<string, number>()
  let closed = false
  let nextId = 1
  let consecutiveFailures = 0
  let lastFailure: string | undefined
  /** No child is started before this (`Date.now()`), after a start failure. */
  let startsBlockedUntil = 0
  let retryTimer: NodeJS.Timeout | undefined

  function count (state: Slot['state']): number {
    let n = 0
    for (const s of slots) if (s.state === state) n++
    return n
  }

  /** Children that serve or will: every live one but those being retired. */
  function capacity (): number {
    return slots.size - count('retiring')
  }

  /** 'down' while starts are blocked and no child is left to serve. */
  function isDown (): boolean {
    return slots.size === 0 && Date.now() < startsBlockedUntil
  }

  function settle (entry: Entry, end: JsEnd): void {
    if (entry.settled) return
    entry.settled = true
    entry.resolve(end)
  }

  function fail (entry: Entry, err: WarrenError): void {
    if (entry.settled) return
    entry.settled = true
    entry.reject(err)
  }

  function startChild (): void {
    let resolveGone!: () => void
    const gone = new Promise<void>((resolve) => { resolveGone = resolve })
    // The handlers run in later turns only, when `slot` is set.
    const child = spawnJsChild(options.heap, options.jail, {
      onMessage: (msg) => onMessage(slot, msg),
      onExit: (exit) => {
        onExit(slot, exit)
        resolveGone()
      }
    })
    const slot: Slot = { child, state: 'starting', calls: 0, gone }
    slots.add(slot)
    slot.startTimer = setTimeout(() => {
      slot.startTimedOut = true
      kill(slot)
    }, options.startTimeoutMs)
    slot.startTimer.unref()
  }

  /** Starts children for the warm minimum and for waiting calls, unless starts are blocked. */
  function maintain (): void {
    if (closed) return
    const wait = startsBlockedUntil - Date.now()
    if (wait > 0) {
      if (retryTimer === undefined) {
        retryTimer = setTimeout(() => { retryTimer = undefined; maintain() }, wait)
        // A pending restart alone must not keep the process alive.
        retryTimer.unref()
      }
      return
    }
    let wanted = queue.length - idle.length - count('starting')
    while (capacity() < options.maxProcesses && (capacity() < options.minProcesses || wanted > 0)) {
      startChild()
      wanted--
    }
  }

  /** The waiting call to run next: of a tenant under its share, the one with the fewest running. */
  function nextEntry (): number {
    let best = -1
    let bestRunning = Infinity
    for (let i = 0; i < queue.length; i++) {
      const tenant = queue[i]!.request.tenant
      const n = tenant === undefined ? 0 : running.get(tenant) ?? 0
      if (n < options.tenantShare && n < bestRunning) {
        best = i
        bestRunning = n
        if (n === 0) break
      }
    }
    return best
  }

  function dispatch (): void {
    while (queue.length > 0 && idle.length > 0) {
      const next = nextEntry()
      if (next < 0) return
      const entry = queue.splice(next, 1)[0]!
      const slot = idle.pop()!
      clearTimeout(slot.idleTimer)
      slot.state = 'busy'
      slot.entry = entry
      entry.slot = slot
      const tenant = entry.request.tenant
      if (tenant !== undefined) running.set(tenant, (running.get(tenant) ?? 0) + 1)
      slot.child.hold(true)
      const { deadline, tenant: _tenant, ...request } = entry.request
      // What is left of the call's time; the node's own timer has the last word anyway.
      const timeoutMs = Math.max(1, Math.floor(deadline - performance.now()))
      slot.child.send({ t: 'run', id: entry.id, ...request, timeoutMs })
    }
  }

  /** The slot's call is over: its tenant runs one call fewer. */
  function release (slot: Slot): void {
    const tenant = slot.entry?.request.tenant
    slot.entry = undefined
    if (tenant === undefined) return
    const n = (running.get(tenant) ?? 1) - 1
    if (n > 0) running.set(tenant, n)
    else running.delete(tenant)
  }

  function makeIdle (slot: Slot): void {
    slot.state = 'idle'
    slot.child.hold(false)
    idle.push(slot)
    dispatch()
    if (slot.state !== 'idle' || capacity() <= options.minProcesses) return
    slot.idleTimer = setTimeout(() => {
      if (slot.state === 'idle' && capacity() > options.minProcesses) kill(slot)
    }, options.idleTimeoutMs)
    slot.idleTimer.unref()
  }

  /**
   * Kills a child (SIGKILL) and starts a replacement if one is needed. Its call, if any, ends
   * when the process is gone. The slot is never used again, even if an answer it sent before
   * the kill still arrives: a call handed to it now would die with it.
   */
  function kill (slot: Slot): void {
    if (slot.state === 'retiring') return
    const i = idle.indexOf(slot)
    if (i >= 0) idle.splice(i, 1)
    clearTimeout(slot.idleTimer)
    clearTimeout(slot.startTimer)
    slot.state = 'retiring'
    slot.child.kill()
    maintain()
  }

  function onMessage (slot: Slot, msg: ChildMessage): void {
    if (msg.t === 'ready') {
      if (slot.state !== 'starting') return
      clearTimeout(slot.startTimer)
      consecutiveFailures = 0
      makeIdle(slot)
      return
    }
    const entry = slot.entry
    if (entry === undefined || msg.id !== entry.id) return
    if (msg.t === 'out') {
      if (!entry.settled) entry.onOutput(msg.fd, msg.data)
      return
    }
    // 'done': the call is over and the child free again, unless it is being killed.
    release(slot)
    slot.calls += 1
    settle(entry, { kind: 'done', exitCode: msg.exitCode, truncated: msg.truncated, timedOut: msg.timedOut })
    if (slot.state === 'retiring') return
    if (slot.calls >= options.callsPerProcess) kill(slot)
    else makeIdle(slot)
  }

  function onExit (slot: Slot, exit: ChildExit): void {
    const wasStarting = slot.state === 'starting'
    slots.delete(slot)
    const i = idle.indexOf(slot)
    if (i >= 0) idle.splice(i, 1)
    clearTimeout(slot.idleTimer)
    clearTimeout(slot.startTimer)
    if (slot.entry !== undefined) {
      const { reason, message } = causeOfDeath(exit)
      settle(slot.entry, { kind: 'died', reason, message })
      release(slot)
    }
    if (slot.startTimedOut === true) startFailed(`js process not ready after ${options.startTimeoutMs} ms`)
    else if (wasStarting && !exit.killedByNode) startFailed(`js process failed to start: it ${describeExit(exit)}`)
    // Its tenant may be under its share again, with a call waiting for an idle process.
    dispatch()
    maintain()
  }

  function startFailed (why: string): void {
    consecutiveFailures += 1
    lastFailure = why
    const backoff = Math.min(options.restartBackoffMaxMs, options.restartBackoffMs * 2 ** (consecutiveFailures - 1))
    startsBlockedUntil = Date.now() + backoff
    // Calls wait on live children if there are any; with none left they would wait for nothing.
    if (slots.size > 0) return
    const err = unavailable('restarting')
    for (const entry of queue.splice(0)) fail(entry, err)
  }

  function unavailable (reason: 'closed' | 'restarting'): WarrenError {
    return reason === 'closed'
      ? createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the function backend is closed', { reason })
      : createError(ErrorCodes.BACKEND_UNAVAILABLE, `no js process can start: ${lastFailure ?? 'a failure'}`,
        { reason, retryAfterMs: Math.max(0, startsBlockedUntil - Date.now()) })
  }

  function refused (err: WarrenError): JsTicket {
    return { result: Promise.reject(err), started: false, cancel () {} }
  }

  maintain()

  return {
    submit (request, onOutput) {
      if (closed) return refused(unavailable('closed'))
      if (isDown()) return refused(unavailable('restarting'))
      if (queue.length >= options.maxQueue) {
        return refused(createError(ErrorCodes.OVERLOADED, 'too many js calls waiting for a process',
          { queued: queue.length, maxQueue: options.maxQueue }))
      }
      let resolve!: (end: JsEnd) => void
      let reject!: (err: WarrenError) => void
      const result = new Promise<JsEnd>((res, rej) => { resolve = res; reject = rej })
      const entry: Entry = { id: nextId++, request, onOutput, settled: false, resolve, reject }
      queue.push(entry)
      dispatch()
      maintain()
      return {
        result,
        get started () { return entry.slot !== undefined },
        cancel () {
          if (entry.settled) return
          if (entry.slot === undefined) {
            queue.splice(queue.indexOf(entry), 1)
            settle(entry, { kind: 'cancelled' })
            return
          }
          kill(entry.slot)
        }
      }
    },

    status () {
      const status: JsPoolStatus = {
        state: closed ? 'closed' : isDown() ? 'down' : 'up',
        processes: slots.size,
        idle: idle.length,
        busy: count('busy'),
        queued: queue.length,
        consecutiveFailures,
        pids: [...slots].flatMap((s) => s.child.pid === undefined ? [] : [s.child.pid])
      }
      if (status.state === 'down') status.retryAfterMs = Math.max(0, startsBlockedUntil - Date.now())
      if (lastFailure !== undefined) status.lastFailure = lastFailure
      return status
    },

    async close () {
      if (!closed) {
        closed = true
        clearTimeout(retryTimer)
        const err = unavailable('closed')
        for (const entry of queue.splice(0)) fail(entry, err)
        for (const slot of slots) kill(slot)
      }
      await Promise.all([...slots].map(async (s) => await s.gone))
    }
  }
}
