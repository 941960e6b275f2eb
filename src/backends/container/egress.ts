/**
 * The egress proxy of one sandbox: the only way out of a sandbox whose network namespace has
 * nothing but loopback. Inside, warren-init relays 127.0.0.1:3128 to this proxy's Unix socket
 * (agent/relay.c); commands find it through HTTP_PROXY / HTTPS_PROXY.
 *
 * It speaks just enough HTTP/1.1 proxying: `CONNECT host:port` (TLS and anything else tunnelled)
 * and absolute-form requests (`GET http://host/path`, passed on with `Connection: close`, one
 * request per connection). A destination must match the sandbox's allow-list. An allow-list never
 * names an inside address (egress-address.ts: loopback, private, link-local, multicast, this
 * node's own addresses, `localhost`): refused at spec time. A name is resolved here, once; if any
 * answer is inside the request is refused, otherwise the proxy connects to the address it checked,
 * so a DNS answer cannot point a sandbox at the node, the control plane or the local network.
 * The one exception is the operator's: a name pinned to an internal `address:port` (a package
 * mirror on the local network, say) reaches exactly that. Refusals answer 403 with the reason.
 */
import { lookup as systemLookup } from 'node:dns/promises'
import { rmSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { createError, ErrorCodes } from '../../errors.js'
import { canonicalHost, insideReason, isLocalName, ownAddresses } from './egress-address.js'

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

/** One allow-list entry: `host`, `*.domain` (any subdomain), or either with `:port`; IP literals too (IPv6 in brackets). */
interface Rule { host: string, wildcard: boolean, port: number | undefined }

const HOST = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/

/** How a sandbox's proxy resolves a name: every address it has. A seam for tests. */
/** What commands of a sandbox with egress see: the relay to its proxy, under every usual name. */
export const EGRESS_ENV: Readonly<Record<string, string>> = {
  HTTP_PROXY: EgressDefaults.proxyUrl, HTTPS_PROXY: EgressDefaults.proxyUrl, http_proxy: EgressDefaults.proxyUrl, https_proxy: EgressDefaults.proxyUrl,
  NO_PROXY: 'localhost,127.0.0.1', no_proxy: 'localhost,127.0.0.1'
}

export type EgressLookup = (name: string) => Promise<Array<{ address: string }>>

export interface EgressProxyOptions {
  /** Resolves names (default: the system resolver, all answers). */
  lookup?: EgressLookup
  /**
   * Names the operator pins to an internal `address:port`, e.g. `{ 'mirror.internal': '10.0.0.5:3141' }`:
   * a sandbox whose allow-list names one reaches exactly that address and port, nothing else there.
   */
  hosts?: Readonly<Record<string, string>>
}

const systemResolver: EgressLookup = async (name) => await systemLookup(name, { all: true, verbatim: true })

/** Splits `host`, `host:port`, `[v6]` or `[v6]:port`; undefined when the port is not 1-65535. */
function splitHostPort (text: string): { host: string, port: number | undefined } | undefined {
  const m = /^(\[[^\]]*\]|[^:[\]]*)(?::(\d{1,5}))?$/.exec(text)
  if (m === null) return undefined
  const port = m[2] === undefined ? undefined : Number(m[2])
  if (port !== undefined && (port < 1 || port > 65535)) return undefined
  return { host: m[1]!, port }
}

const NOT_A_HOST = 'must be a host name, *.domain or an IP address, optionally with :port'

/** Reads one allow-list entry; a string says why it is refused. */
function ruleOf (entry: string): Rule | string {
  const text = entry.trim()
  if (text.length === 0 || text.length > 260) return NOT_A_HOST
  const parts = splitHostPort(text)
  if (parts === undefined) return 'must be host, host:port or [IPv6]:port, with a port from 1 to 65535'
  const wildcard = parts.host.startsWith('*.')
  const host = canonicalHost(wildcard ? parts.host.slice(2) : parts.host)
  if (host === undefined) return NOT_A_HOST
  if (host.kind === 'ip') {
    if (wildcard) return 'a wildcard names a domain, not an address'
    const inside = insideReason(host.address)
    if (inside !== undefined) return `names ${host.address}, a ${inside} address: a sandbox never reaches inside`
    return { host: host.address, wildcard, port: parts.port }
  }
  if (!HOST.test(host.name) || host.name.length > 253) return NOT_A_HOST
  if (isLocalName(host.name)) return `names ${host.name}, this machine: a sandbox never reaches inside`
  // A last label of digits is read as an address by some resolvers.
  if (/^\d+$/.test(host.name.slice(host.name.lastIndexOf('.') + 1))) return 'must not end in a number unless it is an IP address'
  return { host: host.name, wildcard, port: parts.port }
}

/** A rule as text, in canonical form. */
function ruleText (r: Rule): string {
  const host = r.host.includes(':') ? `[${r.host}]` : r.host
  return `${r.wildcard ? '*.' : ''}${host}${r.port === undefined ? '' : `:${r.port}`}`
}

/**
 * Checks an allow-list as a spec gives it.
 * @returns the entries in canonical form (lower case, addresses in their plain notation)
 * @throws WARREN_ERR_BAD_SPEC naming the entry (`network.egress.N`)
 */
export function parseEgressRules (entries: unknown, field = 'network.egress'): string[] {
  if (!Array.isArray(entries)) throw createError(ErrorCodes.BAD_SPEC, `${field} must be an array of hosts`, { field })
  if (entries.length > EgressDefaults.maxRules) throw createError(ErrorCodes.BAD_SPEC, `${field} has more than ${EgressDefaults.maxRules} entries`, { field })
  return entries.map((e, i) => {
    const rule = typeof e === 'string' ? ruleOf(e) : 'must be a string'
    if (typeof rule === 'string') throw createError(ErrorCodes.BAD_SPEC, `${field}.${i} ${rule}`, { field: `${field}.${i}` })
    return ruleText(rule)
  })
}

function allowedBy (rules: readonly Rule[], host: string, port: number): Rule | undefined {
  return rules.find((r) => (r.port === undefined ? port === 80 || port === 443 : r.port === port) &&
    (r.wildcard ? host.endsWith(`.${r.host}`) : host === r.host))
}

type Pinned = Map<string, { address: string, port: number }>

/** The operator's pinned names, checked once when the node starts. */
function pinnedHosts (hosts: Readonly<Record<string, string>>): Pinned {
  const out: Pinned = new Map()
  for (const [name, target] of Object.entries(hosts)) {
    const n = canonicalHost(name)
    const t = splitHostPort(target)
    const a = t === undefined ? undefined : canonicalHost(t.host)
    if (n?.kind !== 'name' || !HOST.test(n.name) || t?.port === undefined || a?.kind !== 'ip') {
      throw createError(ErrorCodes.INVALID_ARGUMENT, `egress host ${name}=${target} must be name=address:port`, { field: 'egress.hosts' })
    }
    out.set(n.name, { address: a.address, port: t.port })
  }
  return out
}

export interface EgressProxy {
  readonly socketPath: string
  close (): Promise<void>
}

/** How a node's proxies find a destination: the resolver and the operator's pinned names, checked. */
export interface EgressRouting { readonly lookup: EgressLookup, readonly pinned: ReadonlyMap<string, { address: string, port: number }> }

/**
 * Checks the node's egress options once, when the node starts, so a malformed pinned name is
 * refused then rather than at the first sandbox that asks for egress.
 * @throws WARREN_ERR_INVALID_ARGUMENT on a malformed pinned name
 */
export function createEgressRouting (options: EgressProxyOptions = {}): EgressRouting {
  return { lookup: options.lookup ?? systemResolver, pinned: pinnedHosts(options.hosts ?? {}) }
}

/** One destination a sandbox asked its proxy for (see `Backend.onEgress`). */
export interface EgressAsk { host: string, port: number, allowed: boolean }

/**
 * Starts a sandbox's proxy on `socketPath` with its allow-list.
 * @param where the node's routing (`createEgressRouting`)
 * @param onAsk hears of every CONNECT or request that names a destination, let through or not
 *   (allowed: it passed the allow-list and the address check); a listener that throws is ignored
 */
export async function startEgressProxy (socketPath: string, allow: readonly string[], where: EgressRouting = createEgressRouting(), onAsk?: (ask: EgressAsk) => void): Promise<EgressProxy> {
  // Entries were checked at spec time; one that fails now (written by an older version) is left out.
  const rules = allow.map((e) => ruleOf(e)).filter((r): r is Rule => typeof r !== 'string')
  const open = new Set<Socket>()
  const server: Server = createServer((client) => {
    if (open.size >= EgressDefaults.maxConnections) { client.destroy(); return }
    open.add(client)
    client.once('close', () => open.delete(client))
    client.on('error', () => {})
    void serve(client, rules, where, onAsk).catch(() => client.destroy())
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

/** How a proxy finds where a name goes. */

/**
 * Where a request may go: the one address to connect to, or why not. A pinned name goes where
 * the operator pinned it; an address is checked as it is; a name is resolved once, and refused
 * if any answer is inside (a name with one inside answer is an attempt, not an accident).
 */
async function destination (host: string, port: number, where: EgressRouting): Promise<{ address: string } | { status: string, why: string }> {
  const pinned = where.pinned.get(host)
  if (pinned !== undefined) {
    return pinned.port === port ? { address: pinned.address } : { status: '403 Forbidden', why: `${host} is reachable on port ${pinned.port} only` }
  }
  const c = canonicalHost(host)
  if (c === undefined) return { status: '400 Bad Request', why: `${host} is not a host` }
  if (c.kind === 'ip') {
    const inside = insideReason(c.address)
    return inside === undefined ? { address: c.address } : { status: '403 Forbidden', why: `${c.address} is a ${inside} address` }
  }
  if (isLocalName(c.name)) return { status: '403 Forbidden', why: `${c.name} is this machine` }
  let answers: Array<{ address: string }>
  try { answers = await where.lookup(c.name) } catch { answers = [] }
  if (answers.length === 0) return { status: '502 Bad Gateway', why: `${host} does not resolve` }
  const own = ownAddresses()
  let first: string | undefined
  for (const a of answers) {
    const ac = canonicalHost(a.address)
    const inside = ac?.kind === 'ip' ? insideReason(ac.address, own) : 'unreadable'
    if (inside !== undefined || ac?.kind !== 'ip') return { status: '403 Forbidden', why: `${host} resolves to an internal address (${a.address}, ${inside ?? 'unreadable'})` }
    first ??= ac.address
  }
  return { address: first! }
}

async function serve (client: Socket, rules: readonly Rule[], where: EgressRouting, onAsk: ((ask: EgressAsk) => void) | undefined): Promise<void> {
  const request = await readHead(client)
  if (request === undefined) { refuse(client, '400 Bad Request', 'no complete request head'); return }
  const [line = '', ...headers] = request.head.split('\r\n')
  const [method = '', target = ''] = line.split(' ')
  let host: string
  let port: number
  let forward: string | undefined
  if (method === 'CONNECT') {
    const parts = splitHostPort(target)
    const c = parts === undefined ? undefined : canonicalHost(parts.host)
    if (parts?.port === undefined || c === undefined) { refuse(client, '400 Bad Request', `CONNECT needs host:port (port 1-65535), not ${target}`); return }
    host = c.kind === 'ip' ? c.address : c.name
    port = parts.port
  } else {
    let url: URL
    try { url = new URL(target) } catch { refuse(client, '400 Bad Request', 'requests through the proxy name an absolute http:// URL'); return }
    if (url.protocol !== 'http:') { refuse(client, '400 Bad Request', `only http:// is forwarded (use CONNECT for ${url.protocol})`); return }
    host = url.hostname.replace(/^\[|\]$/g, '')
    port = url.port === '' ? 80 : Number(url.port)
    const kept = headers.filter((h) => !/^(proxy-connection|connection|keep-alive|proxy-authorization):/i.test(h))
    forward = [`${method} ${url.pathname}${url.search} HTTP/1.1`, ...kept, 'connection: close', '', ''].join('\r\n')
  }
  const tell = (allowed: boolean): void => { try { onAsk?.({ host, port, allowed }) } catch { /* a listener's failure is not the sandbox's */ } }
  if (allowedBy(rules, host, port) === undefined) { tell(false); refuse(client, '403 Forbidden', `${host}:${port} is not in this sandbox's egress allow-list`); return }
  const dest = await destination(host, port, where)
  if ('why' in dest) { tell(false); refuse(client, dest.status, dest.why); return }
  tell(true)
  // The address checked above, not the name again: a second lookup could answer differently.
  const upstream = createConnection({ host: dest.address, port, timeout: EgressDefaults.connectTimeoutMs })
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
