/**
 * `client.worker()`: the same client, run in a worker thread and reached through comlink, so a
 * trainer's main loop (often busy with tensors) never blocks on sandbox traffic. The worker
 * speaks in ids and plain results, since handles cannot cross threads. Errors keep their
 * `code` and `details` across (see worker-errors.ts).
 */
import { Worker } from 'node:worker_threads'
import * as Comlink from 'comlink'
// comlink's Node adapter ships as UMD without an ESM entry of its own.
import nodeAdapter from 'comlink/dist/umd/node-adapter.js'
import type { KillOutcome, SandboxView } from '../cluster/index.js'
import type { CreateSpec, ListFilter } from './client.js'
import type { CommandResult, ExecOptions } from './sandbox.js'
import { keepErrorCodes } from './worker-errors.js'

// The UMD module's default export is the adapter function; its typings describe a module object.
const nodeEndpoint = nodeAdapter as unknown as (nep: unknown) => Comlink.Endpoint

/** What the worker offers; every method is async across the thread boundary. */
export interface WorkerClientApi {
  create (spec?: CreateSpec): Promise<SandboxView>
  createMany (count: number, spec?: CreateSpec): Promise<SandboxView[]>
  exec (id: string, argv: string[], opts?: Omit<ExecOptions, 'onStdout' | 'onStderr'>): Promise<CommandResult>
  info (id: string): Promise<SandboxView>
  kill (id: string): Promise<void>
  /** As `client.kill(ids | { labels })`. */
  killMany (target: string[] | { labels: Record<string, string> }): Promise<KillOutcome[]>
  /** As `sb.setTtl(ms)`: when the sandbox now ends. */
  setTtl (id: string, ms: number): Promise<number>
  list (filter?: ListFilter): Promise<SandboxView[]>
  close (): Promise<void>
}

export interface WorkerClient {
  /** The client in the worker. */
  readonly api: Comlink.Remote<WorkerClientApi>
  /** Closes the client and ends the thread. */
  terminate (): Promise<void>
}

/** Starts a worker thread running a client for `url` and `token` (trusting `ca`, PEM, for a wss:// URL). */
export async function startWorkerClient (url: string, token: string, ca?: string): Promise<WorkerClient> {
  keepErrorCodes()
  const worker = new Worker(new URL('./worker-entry.js', import.meta.url), { workerData: { url, token, ...(ca !== undefined ? { ca } : {}) } })
  const failed = new Promise<never>((_resolve, reject) => worker.once('error', reject))
  const ready = new Promise<void>((resolve) => worker.once('message', () => resolve()))
  await Promise.race([ready, failed])
  const api = Comlink.wrap<WorkerClientApi>(nodeEndpoint(worker))
  return {
    api,
    async terminate () {
      try { await api.close() } finally { await worker.terminate() }
    }
  }
}
