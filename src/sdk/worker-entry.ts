/** The worker thread's side of `client.worker()`: connect, then serve the API over comlink. */
import { parentPort, workerData } from 'node:worker_threads'
import * as Comlink from 'comlink'
import nodeAdapter from 'comlink/dist/umd/node-adapter.js'
import { connect } from './client.js'
import type { WorkerClientApi } from './worker.js'
import { keepErrorCodes } from './worker-errors.js'

// The UMD module's default export is the adapter function; its typings describe a module object.
const nodeEndpoint = nodeAdapter as unknown as (nep: unknown) => Comlink.Endpoint

keepErrorCodes()
const { url, token, ca } = workerData as { url: string, token: string, ca?: string }
const client = await connect({ url, token, ...(ca !== undefined ? { ca } : {}) })

const api: WorkerClientApi = {
  create: async (spec) => await (await client.create(spec)).info(),
  createMany: async (count, spec) => await Promise.all((await client.createMany(count, spec)).map((s) => s.info())),
  exec: async (id, argv, opts) => await (await client.attach(id)).exec(argv, opts),
  info: async (id) => await (await client.attach(id)).info(),
  kill: async (id) => { await (await client.attach(id)).kill() },
  killMany: async (target) => await client.kill(target),
  setTtl: async (id, ms) => await (await client.attach(id)).setTtl(ms),
  list: async (filter) => await client.list(filter),
  close: async () => { await client.close() }
}

parentPort!.postMessage('ready')
Comlink.expose(api, nodeEndpoint(parentPort!))
