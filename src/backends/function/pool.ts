/**
 * The node's worker pool for function calls: one piscina pool, supervised.
 *
 * Piscina replaces a worker that dies while serving, but once a worker fails during start-up
 * it stops maintaining `minThreads` for good, and calls waiting in its queue then wait forever.
 * The supervisor watches every worker (`worker-watch.ts`): one that fails before it reports
 * ready (a preload that throws or exits, a worker that cannot boot), or a pool left with queued
 * calls and no worker, makes the whole piscina instance "broken". A broken instance is retired
 * (calls already running finish on it), every call of it that had not started is rejected with
 * WARREN_ERR_BACKEND_UNAVAILABLE, and a new instance is built after an exponential backoff
 * (reset once a worker of the new instance reports ready). While none is up, new calls are
 * refused at once with `retryAfterMs`: nothing ever waits on a pool that cannot serve it.
 */
import { Piscina } from 'piscina'
import type { Worker } from 'node:worker_threads'
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import type { WorkerResourceLimits } from './defaults.js'
import type { WorkerBootData, WorkerReply, WorkerTask } from './protocol.js'
import { watchWorker } from './worker-watch.js'

/** The compiled worker entry, next to this file in dist/ (see worker/entry.cts for why CommonJS). */
const WORKER_URL = new URL('./worker/entry.cjs', import.meta.url)

/**
 * Worker flags. `js` needed this one for its safety while it ran in these workers; it now runs
 * in processes of its own (js/child.ts), and the flag stays so modules keep the Node they had.
 */
const WORKER_EXEC_ARGV = ['--experimental-vm-modules']

/** How the supervised pool is built. */
export interface SupervisedPoolOptions {
  minThreads: number
  maxThreads: number
  idleTimeoutMs: number
  maxQueue: number
  resourceLimits: WorkerResourceLimits
  /** File URLs each worker imports at start. */
  preload: readonly string[]
  restartBackoffMs: number
  restartBackoffMaxMs: number
}

/** One call handed to the pool. */
export interface PoolTicket {
  /**
   * The worker's reply. Rejects with the worker's error when it died running the call, with
   * piscina's AbortError after `abort()`, or with a WarrenError (BACKEND_UNAVAILABLE,
   * OVERLOADED) when the call never reached a working worker.
   */
  readonly result: Promise<WorkerReply>
  /** Stops the call: dequeues it, or terminates the worker running it. */
  abort (): void
}

/** Where the supervisor stands. */
export interface PoolStatus {
  /** 'up': serving; 'down': waiting `retryAfterMs` to rebuild; 'closed': for good. */
  state: 'up' | 'down' | 'closed'
  /** How many piscina instances have been built (1 + rebuilds). */
  generation: number
  /** Breaks since a worker last reported ready; the backoff grows with it. */
  consecutiveFailures: number
  /** When down: how long until the next rebuild. */
  retryAfterMs?: number
  /** Why the last instance was declared broken. */
  lastFailure?: string
  /** Live workers of the current instance. */
  threads: number
  /** Calls waiting for a worker. */
  queued: number
}

/** A supervised pool. */
export interface SupervisedPool {
  /**
   * Submits a task (its port is transferred to the worker). `hasStarted` tells whether the worker has begun it (the call layer knows,
   * from the call's port): started calls are left to finish when the pool is retired.
   */
  submit (task: WorkerTask, hasStarted: () => boolean): PoolTicket
  /** A snapshot of the supervisor's state. */
  status (): PoolStatus
  /** Worker threads of the current instance, for diagnostics and tests. */
  threads (): readonly Worker[]
  /** Refuses new calls, rejects waiting ones, terminates every worker. */
  close (): Promise<void>
}

/** One piscina instance and the calls and workers the supervisor tracks on it. */
interface Generation {
  piscina: Piscina
  tickets: Set<TicketState>
  /** Workers that got a watch. */
  watched: WeakSet<Worker>
}

interface TicketState {
  settled: boolean
  hasStarted: () => boolean
  /** Rejects the caller's promise (when not settled) and pulls the task out of piscina. */
  fail: (err: WarrenError) => void
}

/** Builds the pool and its first piscina instance. */
export function createSupervisedPool (options: SupervisedPoolOptions): SupervisedPool {
  let state: PoolStatus['state'] = 'up'
  let generation = 0
  let consecutiveFailures = 0
  let lastFailure: string | undefined
  let retryAt = 0
  let retryTimer: NodeJS.Timeout | undefined
  /** The instance serving new calls; undefined while down or closed. */
  let current: Generation | undefined
  /** Broken instances still finishing the calls they had started. */
  const retiring = new Set<Piscina>()

  function startGeneration (): Generation {
    generation += 1
    const boot: WorkerBootData = { preload: [...options.preload] }
    const piscina = new Piscina({
      filename: WORKER_URL.href,
      minThreads: options.minThreads,
      maxThreads: options.maxThreads,
      idleTimeout: options.idleTimeoutMs,
      // The supervisor enforces the queue limit itself, with a coded error.
      maxQueue: options.maxQueue + options.maxThreads,
      // One call per worker: a crash, an OOM or a termination then belongs to exactly one call.
      concurrentTasksPerWorker: 1,
      resourceLimits: { ...options.resourceLimits },
      // Only our flag: the node's own flags are not inherited, because Worker refuses V8 and
      // per-process flags (e.g. --max-old-space-size) passed explicitly, and the limits that
      // matter here are resourceLimits.
      execArgv: [...WORKER_EXEC_ARGV],
      // Functions get their environment from ctx.env; the node's own (tokens included) stays out.
      env: {},
      workerData: boot
    })
    const gen: Generation = { piscina, tickets: new Set(), watched: new WeakSet() }
    // Piscina emits 'error' for a worker that fails with no task on it; the per-worker watch
    // below judges those, and an EventEmitter without an 'error' listener would throw.
    piscina.on('error', () => {})
    piscina.on('workerCreate', () => rescan(gen))
    piscina.on('workerDestroy', () => rescan(gen))
    watchWorkers(gen)
    return gen
  }

  /**
   * Gives every worker of `gen` a watch. Piscina adds workers from inside its own calls and
   * events without telling anyone, so this runs after each of those (in a microtask: a
   * worker's own events can only arrive in a later turn, so none is missed).
   */
  function watchWorkers (gen: Generation): void {
    for (const worker of gen.piscina.threads) {
      if (gen.watched.has(worker)) continue
      gen.watched.add(worker)
      watchWorker(worker, {
        onReady () { if (gen === current) consecutiveFailures = 0 },
        onStartFailure (why) { breakGeneration(gen, `worker failed to start: ${why}`) },
        onExit () {
          rescan(gen)
          queueMicrotask(() => checkStall(gen))
        }
      })
    }
  }

  function rescan (gen: Generation): void {
    queueMicrotask(() => { if (gen === current) watchWorkers(gen) })
  }

  /** Queued calls with no worker left: piscina will not start one by itself after a start failure. */
  function checkStall (gen: Generation): void {
    if (gen !== current || gen.piscina.threads.length > 0) return
    for (const ticket of gen.tickets) {
      if (!ticket.settled && !ticket.hasStarted()) {
        breakGeneration(gen, 'no worker left to run waiting calls')
        return
      }
    }
  }

  function backoffMs (): number {
    return Math.min(options.restartBackoffMaxMs, options.restartBackoffMs * 2 ** Math.max(0, consecutiveFailures - 1))
  }

  function breakGeneration (gen: Generation, why: string): void {
    if (gen !== current || state !== 'up') return
    consecutiveFailures += 1
    lastFailure = why
    state = 'down'
    current = undefined
    const delay = backoffMs()
    retryAt = Date.now() + delay
    const err = createError(ErrorCodes.BACKEND_UNAVAILABLE, `function worker pool broke before the call started: ${why}`,
      { reason: 'pool-broken', retryAfterMs: delay })
    for (const ticket of gen.tickets) {
      if (!ticket.settled && !ticket.hasStarted()) ticket.fail(err)
    }
    retire(gen.piscina)
    retryTimer = setTimeout(() => {
      retryTimer = undefined
      if (state !== 'down') return
      current = startGeneration()
      state = 'up'
    }, delay)
    // A pending rebuild alone must not keep the process alive.
    retryTimer.unref()
  }

  /** Lets a broken instance finish the calls it started, then ends it. */
  function retire (piscina: Piscina): void {
    retiring.add(piscina)
    piscina.close().catch(() => {}).finally(() => retiring.delete(piscina))
  }

  function unavailable (reason: 'closed' | 'restarting'): WarrenError {
    return reason === 'closed'
      ? createError(ErrorCodes.BACKEND_UNAVAILABLE, 'the function backend is closed', { reason })
      : createError(ErrorCodes.BACKEND_UNAVAILABLE, `the function worker pool is restarting after: ${lastFailure ?? 'a failure'}`,
        { reason, retryAfterMs: Math.max(0, retryAt - Date.now()) })
  }

  function refused (err: WarrenError): PoolTicket {
    return { result: Promise.reject(err), abort () {} }
  }

  current = startGeneration()

  return {
    submit (task, hasStarted) {
      if (state === 'closed') return refused(unavailable('closed'))
      const gen = current
      if (state === 'down' || gen === undefined) return refused(unavailable('restarting'))
      if (gen.piscina.queueSize >= options.maxQueue) {
        return refused(createError(ErrorCodes.OVERLOADED, 'too many function calls waiting for a worker',
          { queued: gen.piscina.queueSize, maxQueue: options.maxQueue }))
      }

      const controller = new AbortController()
      let resolve!: (reply: WorkerReply) => void
      let reject!: (err: unknown) => void
      const result = new Promise<WorkerReply>((res, rej) => { resolve = res; reject = rej })
      const ticket: TicketState = {
        settled: false,
        hasStarted,
        fail (err) {
          if (ticket.settled) return
          settle()
          reject(err)
          controller.abort(err)
        }
      }
      const settle = (): void => {
        ticket.settled = true
        gen.tickets.delete(ticket)
        rescan(gen)
      }
      gen.tickets.add(ticket)
      gen.piscina.run(task, { transferList: [task.port], signal: controller.signal }).then(
        (reply: WorkerReply) => { if (!ticket.settled) { settle(); resolve(reply) } },
        (err: unknown) => { if (!ticket.settled) { settle(); reject(err) } }
      )
      watchWorkers(gen)
      rescan(gen)
      return { result, abort () { controller.abort('aborted') } }
    },

    status () {
      const gen = current
      const status: PoolStatus = {
        state,
        generation,
        consecutiveFailures,
        threads: gen?.piscina.threads.length ?? 0,
        queued: gen?.piscina.queueSize ?? 0
      }
      if (state === 'down') status.retryAfterMs = Math.max(0, retryAt - Date.now())
      if (lastFailure !== undefined) status.lastFailure = lastFailure
      return status
    },

    threads () {
      return current?.piscina.threads ?? []
    },

    async close () {
      if (state === 'closed') return
      state = 'closed'
      clearTimeout(retryTimer)
      const gen = current
      current = undefined
      const pools = [...retiring]
      if (gen !== undefined) {
        const err = unavailable('closed')
        for (const ticket of gen.tickets) {
          if (!ticket.hasStarted()) ticket.fail(err)
        }
        pools.push(gen.piscina)
      }
      await Promise.allSettled(pools.map(async (p) => await p.destroy()))
    }
  }
}
