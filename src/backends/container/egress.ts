/**
 * The egress proxy of one sandbox: the only way out of a sandbox whose network namespace has
 * nothing but loopback. Inside, warren-init relays 127.0.0.1:3128 to this proxy's Unix socket
 * (agent/relay.c); commands find it through HTTP_PROXY / HTTPS_PROXY.
 *
 * It speaks just enough HTTP/1.1 proxying: `CONNECT host:port` (TLS and anything else tunnelled)
 * and absolute-form requests (`GET http://host/path`, passed on with `Connection: close`, one
 * request per connection). A destination must match the sandbox's allow-list, and it resolves on
 * the host, where loopback, private, link-local and unspecified addresses are refused unless the
 * allow-list names that address literally: a sandbox never reaches the node, the control plane
 * or the local network by a name. Refusals answer 403 with the reason.
 */
import { lookup } from 'node:dns/promises'
import { rmSync } from 'node:fs'
import { isIP, createConnection, createServer, type Server, type Socket } from 'node:net'
import { createError, ErrorCodes } from '../../errors.js'

export const EgressDefaults = {
  /** Where commands inside find the relay to the proxy. */
  proxyUrl: 'http://127.0.0.1:3128',
  /** Largest request head accepted (request line and headers). */
  maxHeadBytes: 16 * 1024,
  /** Time to send the request head, and to reach the destination. */
  headTimeoutMs: 10_000,
  connectTimeoutMs: 10_000,
  /** Connections through one sandbox's proxy at once. */
  maxConnections: 256,
  maxRules: 256
}

/** One allow-list entry: `host`, `*.domain` (any subdomain), or either with `:port`; IP literals too. */
interface Rule { host: string, wildcard: boolean, port: number | undefined }

const HOST = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/

/**
 * Checks an allow-list as a spec gives it.
 * @throws WARREN_ERR_BAD_SPEC naming the entry
 */
export function parseEgressRules (entries: unknown, field = 'network.egress'): string[] {
  if (!Array.isArray(entries)) throw createError(ErrorCodes.BAD_SPEC, `${field} must be an array of hosts`, { field })
  if (entries.length > EgressDefaults.maxRules) throw createError(ErrorCodes.BAD_SPEC, `${field} has more than ${EgressDefaults.maxRules} entries`, { field })
  return entries.map((e, i) => {
    if (typeof e !== 'string' || ruleOf(e) === undefined) {
      throw createError(ErrorCodes.BAD_SPEC, `${field}[${i}] must be a host name, *.domain or an IP address, optionally with :port`, { field: `${field}[${i}]` })
    }
    return e.toLowerCase()
  })
}

function ruleOf (entry: string): Rule | undefined {
  const text = entry.trim().toLowerCase()
  if (text.length === 0 || text.length > 260) return undefined
  const m = /^(.*?)(?::(\d{1,5}))?$/.exec(text)!
  const port = m[2] === undefined ? undefined : Number(m[2])
  if (port !== undefined && (port < 1 || port > 65535)) return undefined
  const host = m[1]!
  if (isIP(host) === 4) return { host, wildcard: false, port }
  if (!HOST.test(host) || host.length > 253) return undefined
  return host.startsWith('*.') ? { host: host.slice(2), wildcard: true, port } : { host, wildcard: false, port }
}

function allowedBy (rules: readonly Rule[], host: string, port: number): Rule | undefined {
  return rules.find((r) => (r.port === undefined ? port === 80 || port === 443 : r.port === port) &&
    (r.wildcard ? host.endsWith(`.${r.host}`) : host === r.host))
}

/** Addresses a sandbox may not reach by name: the host itself, private networks, link-local. */
export function isInternal (address: string): boolean {
  if (isIP(address) === 4) {
    const [a, b] = address.split('.').map(Number) as [number, number]
    return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127)
  }
  const v6 = address.toLowerCase()
  if (v6.startsWith('::ffff:')) return isInternal(v6.slice(7))
  return v6 === '::' || v6 === '::1' || v6.startsWith('fc') || v6.startsWith('fd') || v6.startsWith('fe8') || v6.startsWith('fe9') || v6.startsWith('fea') || v6.startsWith('feb')
}

export interface EgressProxy {
  readonly socketPath: string
  close (): Promise<void>
}

/** Starts a sandbox's proxy on `socketPath` with its allow-list. */
export async function startEgressProxy (socketPath: string, allow: readonly string[]): Promise<EgressProxy> {
  const rules = allow.map((e) => ruleOf(e)).filter((r): r is Rule => r !== undefined)
  const open = new Set<Socket>()
  const server: Server = createServer((client) => {
    if (open.size >= EgressDefaults.maxConnections) { client.destroy(); return }
    open.add(client)
    client.once('close', () => open.delete(client))
    client.on('error', () => {})
    void serve(client, rules).catch(() => client.destroy())
  })
  rmSync(socketPath, { force: true })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => { server.off('error', reject); resolve() })
  })
  return {
    socketPath,
    async close () {
      for (const s of open) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
      rmSync(socketPath, { force: true })
    }
  }
}

function refuse (client: Socket, status: string, why: string): void {
  const body = `warren egress: ${why}\n`
  client.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
}

/** Reads the request head (up to the blank line); what follows it is kept for the destination. */
function readHead (client: Socket): Promise<{ head: string, rest: Buffer } | undefined> {
  return new Promise((resolve) => {
    let got = Buffer.alloc(0)
    const timer = setTimeout(() => done(undefined), EgressDefaults.headTimeoutMs)
    const onData = (chunk: Buffer): void => {
      got = Buffer.concat([got, chunk])
      const end = got.indexOf('\r\n\r\n')
      if (end >= 0) done({ head: got.subarray(0, end).toString('latin1'), rest: got.subarray(end + 4) })
      else if (got.length > EgressDefaults.maxHeadBytes) done(undefined)
    }
    const done = (r: { head: string, rest: Buffer } | undefined): void => {
      clearTimeout(timer)
      client.off('data', onData)
      client.off('end', onEnd)
      client.pause()
      resolve(r)
    }
    const onEnd = (): void => done(undefined)
    client.on('data', onData)
    client.once('end', onEnd)
  })
}

async function serve (client: Socket, rules: readonly Rule[]): Promise<void> {
  const request = await readHead(client)
  if (request === undefined) { refuse(client, '400 Bad Request', 'no complete request head'); return }
  const [line = '', ...headers] = request.head.split('\r\n')
  const [method = '', target = ''] = line.split(' ')
  let host: string
  let port: number
  let forward: string | undefined
  if (method === 'CONNECT') {
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(target)
    if (m === null) { refuse(client, '400 Bad Request', `CONNECT needs host:port, not ${target}`); return }
    host = m[1]!.toLowerCase()
    port = Number(m[2])
  } else {
    let url: URL
    try { url = new URL(target) } catch { refuse(client, '400 Bad Request', 'requests through the proxy name an absolute http:// URL'); return }
    if (url.protocol !== 'http:') { refuse(client, '400 Bad Request', `only http:// is forwarded (use CONNECT for ${url.protocol})`); return }
    host = url.hostname.toLowerCase().replace(/^\[|\]$/g, '')
    port = url.port === '' ? 80 : Number(url.port)
    const kept = headers.filter((h) => !/^(proxy-connection|connection|keep-alive|proxy-authorization):/i.test(h))
    forward = [`${method} ${url.pathname}${url.search} HTTP/1.1`, ...kept, 'connection: close', '', ''].join('\r\n')
  }
  const rule = allowedBy(rules, host, port)
  if (rule === undefined) { refuse(client, '403 Forbidden', `${host}:${port} is not in this sandbox's egress allow-list`); return }
  let address: string
  try {
    address = isIP(host) !== 0 ? host : (await lookup(host)).address
  } catch {
    refuse(client, '502 Bad Gateway', `${host} does not resolve`)
    return
  }
  // An address the rule names literally is what the user asked for; any other internal one is not.
  if (isInternal(address) && rule.host !== address) { refuse(client, '403 Forbidden', `${host} resolves to an internal address`); return }
  const upstream = createConnection({ host: address, port, timeout: EgressDefaults.connectTimeoutMs })
  let connected = false
  upstream.on('error', () => {
    if (connected) client.destroy()
    else if (!client.destroyed) refuse(client, '502 Bad Gateway', `cannot reach ${host}:${port}`)
  })
  upstream.once('timeout', () => { if (!connected) upstream.destroy(new Error('connect timeout')) })
  upstream.once('connect', () => {
    connected = true
    upstream.setTimeout(0)
    if (forward === undefined) client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    else upstream.write(forward)
    if (request.rest.length > 0) upstream.write(request.rest)
    client.pipe(upstream)
    upstream.pipe(client)
    client.resume()
  })
  client.once('close', () => upstream.destroy())
}
