/**
 * Which destinations are inside: the node itself, the networks around it, and addresses that
 * are not one host. A sandbox never reaches them through its egress proxy, neither by a rule
 * that names them (refused at spec time) nor by a name whose DNS answer points there (refused
 * at connect time). Hosts are compared in one canonical form, the one the WHATWG URL parser
 * gives, so `127.1`, `0x7f.1`, `2130706433` and `[::ffff:7f00:1]` are all seen as 127.0.0.1.
 */
import { BlockList, isIP } from 'node:net'
import { networkInterfaces } from 'node:os'

/** A host as a rule or a request names it, in canonical form. */
export type CanonicalHost = { kind: 'ip', address: string, family: 4 | 6 } | { kind: 'name', name: string }

/**
 * Puts a host in canonical form: IPv4 in dotted decimal (whatever notation it came in), IPv6
 * compressed and lower case without brackets, names lower case.
 * @returns undefined when it is neither an address nor a host name
 */
export function canonicalHost (text: string): CanonicalHost | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  if (bare.includes(':')) {
    if (isIP(bare) !== 6) return undefined
    return { kind: 'ip', address: new URL(`http://[${bare}]/`).hostname.slice(1, -1), family: 6 }
  }
  if (bare.length === 0 || /[/?#@\s\\%]/.test(bare)) return undefined
  let hostname: string
  try { hostname = new URL(`http://${bare}/`).hostname } catch { return undefined }
  return isIP(hostname) === 4 ? { kind: 'ip', address: hostname, family: 4 } : { kind: 'name', name: hostname }
}

/** The ranges that are inside, by what they are. */
const RANGES: ReadonlyArray<[what: string, family: 'ipv4' | 'ipv6', net: string, prefix: number]> = [
  ['unspecified', 'ipv4', '0.0.0.0', 8],
  ['private', 'ipv4', '10.0.0.0', 8],
  ['shared (CGNAT)', 'ipv4', '100.64.0.0', 10],
  ['loopback', 'ipv4', '127.0.0.0', 8],
  ['link-local', 'ipv4', '169.254.0.0', 16],
  ['private', 'ipv4', '172.16.0.0', 12],
  ['reserved', 'ipv4', '192.0.0.0', 24],
  ['private', 'ipv4', '192.168.0.0', 16],
  ['reserved', 'ipv4', '198.18.0.0', 15],
  ['multicast', 'ipv4', '224.0.0.0', 4],
  ['reserved', 'ipv4', '240.0.0.0', 4],
  ['unspecified', 'ipv6', '::', 128],
  ['loopback', 'ipv6', '::1', 128],
  ['private', 'ipv6', 'fc00::', 7],
  ['link-local', 'ipv6', 'fe80::', 10],
  ['site-local', 'ipv6', 'fec0::', 10],
  ['multicast', 'ipv6', 'ff00::', 8]
]

const blocks = RANGES.map(([what, family, net, prefix]) => {
  const list = new BlockList()
  list.addSubnet(net, prefix, family)
  return { what, family, list }
})

/** The 16-bit words of a canonical (compressed, hex-only) IPv6 address. */
function words (v6: string): number[] {
  const [head = '', tail] = v6.split('::')
  const h = head === '' ? [] : head.split(':')
  const t = tail === undefined || tail === '' ? [] : tail.split(':')
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t]
  return all.map((w) => parseInt(w, 16))
}

/** The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4), if any. */
function embeddedIPv4 (v6: string): string | undefined {
  const w = words(v6)
  const quad = (hi: number, lo: number): string => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`
  const zero = (from: number, to: number): boolean => w.slice(from, to).every((x) => x === 0)
  if (zero(0, 5) && (w[5] === 0xffff || w[5] === 0)) return quad(w[6]!, w[7]!) // ::ffff:a.b.c.d and ::a.b.c.d
  if (w[0] === 0x64 && w[1] === 0xff9b && zero(2, 6)) return quad(w[6]!, w[7]!) // 64:ff9b::a.b.c.d
  if (w[0] === 0x2002) return quad(w[1]!, w[2]!) // 2002:aabb:ccdd::
  return undefined
}

/** This node's own addresses, read afresh by each caller (interfaces come and go). */
export function ownAddresses (): Set<string> {
  const out = new Set<string>()
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      const c = canonicalHost(a.address.split('%')[0]!)
      if (c?.kind === 'ip') out.add(c.address)
    }
  }
  return out
}

/**
 * Says why an address is inside, or undefined when a sandbox may reach it.
 * @param address an IP address in canonical form (see `canonicalHost`)
 * @param own this node's addresses (`ownAddresses()`), read once by a caller checking many
 */
export function insideReason (address: string, own?: ReadonlySet<string>): string | undefined {
  const family = isIP(address)
  if (family === 0) return 'not an address'
  if (family === 6) {
    const v4 = embeddedIPv4(address)
    if (v4 !== undefined && v4 !== '0.0.0.0' && v4 !== '0.0.0.1') {
      const why = insideReason(v4, own)
      if (why !== undefined) return `${why} (as IPv6)`
    }
  }
  const type = family === 4 ? 'ipv4' : 'ipv6'
  for (const b of blocks) if (b.family === type && b.list.check(address, type)) return b.what
  if ((own ?? ownAddresses()).has(address)) return "this node's own address"
  return undefined
}

/** Names that mean this machine whatever DNS says (RFC 6761): `localhost` and anything under it. */
export function isLocalName (name: string): boolean {
  const n = name.toLowerCase().replace(/\.$/, '')
  return n === 'localhost' || n.endsWith('.localhost') || n === 'localhost.localdomain'
}

/** True when an address (any notation) is inside. */
export function isInternal (address: string): boolean {
  const c = canonicalHost(address)
  return c === undefined || c.kind !== 'ip' || insideReason(c.address) !== undefined
}
