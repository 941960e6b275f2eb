/**
 * The CLI's connection to the control plane. Before the SDK dials (it retries for its whole
 * connect timeout, right for a program started beside its server), the CLI tries the address
 * once, so a refused or unreachable control plane is named at once: its address and port, and why.
 */
import { connect as netConnect } from 'node:net'
import { connect, resolveConfig, type Client } from '../sdk/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { systemCause } from './failure.js'

export const CliClientDefaults = {
  /** How long the first try of the control plane's address may take. */
  probeTimeoutMs: 5_000
}

/** Host and port of a ws:// or wss:// URL (the scheme's port when none is written). */
function addressOf (url: string): { host: string, port: number } | undefined {
  let u: URL
  try { u = new URL(url) } catch { return undefined }
  if (u.protocol !== 'ws:' && u.protocol !== 'wss:') return undefined
  const port = u.port !== '' ? Number(u.port) : u.protocol === 'wss:' ? 443 : 80
  return { host: u.hostname.replace(/^\[(.*)\]$/, '$1'), port }
}

/**
 * One TCP connection to the control plane's address, closed at once.
 * @throws CONNECTION_CLOSED naming the URL, address, port and the socket's error
 */
async function probe (url: string): Promise<void> {
  const at = addressOf(url)
  if (at === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `the control plane's URL must be ws://HOST:PORT or wss://HOST:PORT, not ${url}`, { field: 'url' })
  await new Promise<void>((resolve, reject) => {
    const socket = netConnect({ host: at.host, port: at.port })
    const fail = (why: string, cause?: string): void => {
      socket.destroy()
      reject(createError(ErrorCodes.CONNECTION_CLOSED, `cannot reach the control plane at ${url} (${at.host} port ${at.port}): ${why}`, { url, address: at.host, port: at.port, ...(cause !== undefined ? { cause } : {}) }))
    }
    socket.setTimeout(CliClientDefaults.probeTimeoutMs, () => fail(`no answer within ${CliClientDefaults.probeTimeoutMs} ms`))
    socket.once('error', (err: NodeJS.ErrnoException) => fail(systemCause(err), err.code))
    socket.once('connect', () => { socket.destroy(); resolve() })
  })
}

/** Connects as the config says (after one try of the address), runs `fn`, and closes. */
export async function withClient<T> (fn: (c: Client) => Promise<T>): Promise<T> {
  const { url, token, ca } = resolveConfig()
  await probe(url)
  const client = await connect({ url, token, ...(ca !== undefined ? { ca } : {}) })
  try { return await fn(client) } finally { await client.close() }
}
