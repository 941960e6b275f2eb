/**
 * A small client of QMP, QEMU's JSON control protocol (docs/interop/qmp-spec): on connect the
 * server greets, `qmp_capabilities` leaves negotiation mode, then each command is one JSON
 * object answered by `{return}` or `{error}` in order; `{event}` objects may come in between.
 * One command at a time is in flight here: QEMU answers in order anyway.
 */
import { createConnection } from 'node:net'
import { createError, ErrorCodes } from '../../errors.js'
import { MicrovmDefaults } from './defaults.js'

/** A connection to one QEMU's monitor. */
export interface QmpClient {
  /** Runs a command; resolves with its `return` value. */
  execute (command: string, args?: Record<string, unknown>, timeoutMs?: number): Promise<unknown>
  /** Calls `listener` with each asynchronous event QEMU sends from now on; returns the unsubscribe. */
  onEvent (listener: (event: { event: string, data?: Record<string, unknown> }) => void): () => void
  /** Resolves when the connection ends (QEMU exited, or `close`). */
  readonly ended: Promise<void>
  close (): void
}

/** Bytes of one QMP line beyond which the peer is not QEMU speaking QMP. */
const MAX_LINE = 1024 * 1024

/**
 * Connects to a QMP socket and negotiates capabilities.
 * @throws WARREN_ERR_SANDBOX_GONE when nothing listens there, WARREN_ERR_TIMEOUT when it does not greet
 */
export async function connectQmp (path: string, timeoutMs: number = MicrovmDefaults.qmpTimeoutMs): Promise<QmpClient> {
  const socket = createConnection({ path })
  let buffered = ''
  let closed = false
  const listeners = new Set<(event: { event: string, data?: Record<string, unknown> }) => void>()
  const waiting: Array<{ resolve: (m: Record<string, unknown>) => void, reject: (e: Error) => void }> = []
  let markEnded!: () => void
  const ended = new Promise<void>((resolve) => { markEnded = resolve })
  const fail = (err: Error): void => {
    if (closed) return
    closed = true
    socket.destroy()
    for (const w of waiting.splice(0)) w.reject(err)
    markEnded()
  }
  socket.on('error', (err) => fail(createError(ErrorCodes.SANDBOX_GONE, `QMP at ${path}: ${err.message}`, { path })))
  socket.on('close', () => fail(createError(ErrorCodes.SANDBOX_GONE, `QMP at ${path} closed`, { path })))
  socket.setEncoding('utf8')
  socket.on('data', (text: string) => {
    buffered += text
    if (buffered.length > MAX_LINE) { fail(createError(ErrorCodes.PROTOCOL_VIOLATION, `QMP at ${path} sent a line over ${MAX_LINE} bytes`)); return }
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl).trim()
      buffered = buffered.slice(nl + 1)
      if (line === '') continue
      let msg: Record<string, unknown>
      try { msg = JSON.parse(line) as Record<string, unknown> } catch { fail(createError(ErrorCodes.PROTOCOL_VIOLATION, `QMP at ${path} sent non-JSON`)); return }
      if ('event' in msg) {
        for (const l of [...listeners]) l(msg as { event: string, data?: Record<string, unknown> })
        continue
      }
      waiting.shift()?.resolve(msg)
    }
  })

  /** The next non-event message, or a rejection after `ms`. */
  const next = (ms: number, what: string): Promise<Record<string, unknown>> => new Promise((resolve, reject) => {
    if (closed) { reject(createError(ErrorCodes.SANDBOX_GONE, `QMP at ${path} is closed`, { path })); return }
    const timer = setTimeout(() => fail(createError(ErrorCodes.TIMEOUT, `QMP at ${path} did not answer ${what} within ${ms} ms`, { path })), ms)
    waiting.push({
      resolve: (m) => { clearTimeout(timer); resolve(m) },
      reject: (e) => { clearTimeout(timer); reject(e) }
    })
  })

  let queue: Promise<unknown> = Promise.resolve()
  const execute = (command: string, args?: Record<string, unknown>, ms: number = timeoutMs): Promise<unknown> => {
    const run = async (): Promise<unknown> => {
      const reply = next(ms, command)
      socket.write(JSON.stringify(args === undefined ? { execute: command } : { execute: command, arguments: args }) + '\n')
      const m = await reply
      if ('error' in m) {
        const e = m.error as { class?: string, desc?: string }
        throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `QMP ${command}: ${e.desc ?? e.class ?? 'error'}`, { reason: 'qmp', command })
      }
      return m.return
    }
    const result = queue.then(run, run)
    queue = result.catch(() => {})
    return result
  }

  // Waiting for the greeting before connecting: it may arrive in the same turn as the connect.
  const greeted = next(timeoutMs, 'the greeting')
  greeted.catch(() => {})
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve)
    socket.once('error', reject)
  }).catch((err: Error) => { throw createError(ErrorCodes.SANDBOX_GONE, `cannot connect to QMP at ${path}: ${err.message}`, { path }) })
  const greeting = await greeted
  if (!('QMP' in greeting)) { fail(createError(ErrorCodes.PROTOCOL_VIOLATION, `QMP at ${path} did not greet`)); throw createError(ErrorCodes.PROTOCOL_VIOLATION, `QMP at ${path} did not greet`) }
  await execute('qmp_capabilities')
  return {
    execute,
    onEvent: (listener) => { listeners.add(listener); return () => { listeners.delete(listener) } },
    ended,
    close: () => { fail(createError(ErrorCodes.CONNECTION_CLOSED, 'QMP connection closed by the client')) }
  }
}
