/**
 * The gateway's user links by the key that opened them, so that a key that stops working stops
 * at once everywhere: a revoked key's links (and a rotated admin key's) are closed when the iam
 * says so, an expiring key's at its expiry, each with a `bye` carrying WARREN_ERR_UNAUTHENTICATED
 * (`details.reason` `revoked` or `expired`) so its client does not come back. A resume needs
 * the key to authenticate again, so nothing reopens them.
 *
 * The request in flight that caused it (a revoke or rotation sent with the key it ends) gets its
 * answer first: a link being ended refuses new requests and closes once those in flight are
 * answered, or after `graceMs` at the latest.
 */
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import type { Link } from '../../transport/index.js'
import type { Principal } from '../iam/index.js'

export const KeySessionDefaults = {
  /** How long the requests in flight of an ended key's link may take before it is closed anyway. */
  graceMs: 1000,
  /**
   * Links one key may hold open at once; the next is closed at once with WARREN_ERR_QUOTA. Each
   * may buffer up to the link's `maxBufferedBytes` for a client that does not read, so the count
   * is what bounds a key's memory on the gateway; a trainer with a client per worker process
   * stays well below it.
   */
  maxPerKey: 512,
  /** The longest a timer may be set for (setTimeout's bound); a longer expiry is waited for in steps. */
  maxTimerMs: 2 ** 31 - 1
}

interface Tracked {
  link: Link
  keyId: string
  inflight: number
  ending: WarrenError | undefined
  timer: NodeJS.Timeout | undefined
}

/** Why a key's sessions end, as their clients are told. */
export function keyEnded (keyId: string, reason: 'revoked' | 'expired'): WarrenError {
  return createError(ErrorCodes.UNAUTHENTICATED, `key ${keyId} ${reason === 'revoked' ? 'was revoked' : 'has expired'}`, { reason, keyId })
}

export interface KeySessionOptions {
  graceMs?: number
  maxPerKey?: number
  now?: () => number
}

/** What wraps each request of a tracked link. */
export type RunRequest = <T>(request: () => Promise<T>) => Promise<T>

/** Why a key's new link is refused: it holds the most links a key may. */
export function tooManySessions (keyId: string, max: number): WarrenError {
  return createError(ErrorCodes.QUOTA, `key ${keyId} has ${max} sessions open, the most a key may: close some (each client is one session)`, { keyId, limit: max })
}

export class KeySessions {
  private readonly byKey = new Map<string, Set<Tracked>>()
  private readonly graceMs: number
  private readonly maxPerKey: number
  private readonly now: () => number

  constructor (o: KeySessionOptions = {}) {
    this.graceMs = o.graceMs ?? KeySessionDefaults.graceMs
    this.maxPerKey = o.maxPerKey ?? KeySessionDefaults.maxPerKey
    this.now = o.now ?? Date.now
  }

  /**
   * Follows a user link until it closes (the entry goes with it, so this holds only live links).
   * A key that holds `maxPerKey` links already gets the error instead, and the link is closed
   * with it (a resumed session is the same link, so it never counts twice).
   * @returns `run`, which wraps each of the link's requests, or the refusal
   */
  track (link: Link, principal: Principal): RunRequest | WarrenError {
    const t: Tracked = { link, keyId: principal.keyId, inflight: 0, ending: undefined, timer: undefined }
    let set = this.byKey.get(t.keyId)
    if (set !== undefined && set.size >= this.maxPerKey) {
      const refusal = tooManySessions(t.keyId, this.maxPerKey)
      link.close(refusal)
      return refusal
    }
    if (set === undefined) { set = new Set(); this.byKey.set(t.keyId, set) }
    set.add(t)
    link.once('close', () => {
      clearTimeout(t.timer)
      const s = this.byKey.get(t.keyId)
      s?.delete(t)
      if (s?.size === 0) this.byKey.delete(t.keyId)
    })
    if (principal.expiresAt !== undefined) this.expireAt(t, principal.expiresAt)
    return async (request) => {
      if (t.ending !== undefined) throw t.ending
      t.inflight++
      try {
        return await request()
      } finally {
        t.inflight--
        // After the answer is queued (its promise settles first), so the client gets it before the bye.
        if (t.ending !== undefined && t.inflight === 0) setImmediate(() => this.close(t))
      }
    }
  }

  /** Ends every link of these keys (revoked). */
  endKeys (keyIds: readonly string[]): void {
    for (const id of keyIds) for (const t of [...this.byKey.get(id) ?? []]) this.end(t, keyEnded(id, 'revoked'))
  }

  /** Links open now, for tests and the live page. */
  get size (): number {
    let n = 0
    for (const s of this.byKey.values()) n += s.size
    return n
  }

  private expireAt (t: Tracked, at: number): void {
    const wait = at - this.now()
    if (wait <= 0) { this.end(t, keyEnded(t.keyId, 'expired')); return }
    t.timer = setTimeout(() => this.expireAt(t, at), Math.min(wait, KeySessionDefaults.maxTimerMs))
    t.timer.unref()
  }

  private end (t: Tracked, why: WarrenError): void {
    if (t.ending !== undefined) return
    t.ending = why
    clearTimeout(t.timer)
    if (t.inflight === 0) { this.close(t); return }
    t.timer = setTimeout(() => this.close(t), this.graceMs)
    t.timer.unref()
  }

  private close (t: Tracked): void {
    clearTimeout(t.timer)
    if (t.link.state !== 'closed') t.link.close(t.ending)
  }
}
