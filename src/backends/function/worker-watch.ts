/**
 * Watches one piscina worker for the supervisor: tells when it reports ready, when it ends
 * before that (a start failure), and when it exits at all.
 *
 * A worker that ends before it reported ready failed to start, unless someone terminated it on
 * purpose (piscina on abort or idle, a test, an operator). Those all go through `terminate()`,
 * which is wrapped here to say so, because the exit code cannot tell a terminate() from a
 * process.exit(1) in a preload.
 */
import type { Worker } from 'node:worker_threads'
import { isReadyMessage } from './protocol.js'

/** What the watcher reports. */
export interface WorkerWatchHandlers {
  /** The worker finished starting (its preloads loaded). */
  onReady: () => void
  /** The worker ended before it was ready, not by terminate(). */
  onStartFailure: (why: string) => void
  /** The worker exited, for whatever reason. */
  onExit: () => void
}

/** Attaches the watch to `worker`. Call once per worker, before it can emit (same turn as its creation). */
export function watchWorker (worker: Worker, handlers: WorkerWatchHandlers): void {
  let ready = false
  let terminated = false
  let error: Error | undefined

  const terminate = worker.terminate.bind(worker)
  worker.terminate = async () => {
    // Piscina also calls terminate() on a worker that already exited (threadId is then -1)
    // while cleaning up after it; that is no decision to stop it.
    if (worker.threadId !== -1) terminated = true
    return await terminate()
  }

  worker.on('message', (msg: unknown) => {
    if (!isReadyMessage(msg) || ready) return
    ready = true
    handlers.onReady()
  })
  worker.on('error', (err: Error) => { error = err })
  worker.on('exit', (code: number) => {
    handlers.onExit()
    // An error is never the work of terminate() (piscina terminates after one, too).
    if (terminated && error === undefined) return
    // Exits and messages arrive on different ports, whose order within one turn of the event
    // loop is not guaranteed: judge a turn later, when a ready message sent before the exit
    // has surely been seen.
    setImmediate(() => {
      if (!ready) handlers.onStartFailure(error?.message ?? `exited with code ${code}`)
    })
  })
}
