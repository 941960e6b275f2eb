/**
 * Actors across links. `createRemoteRef` makes a `Ref` whose tells and asks become frames on a
 * link; `exposeSystem` makes the link handler that delivers incoming frames to a local
 * ActorSystem; `routeRemote` installs the kernel's remote router so `system.refFor(address)`
 * finds actors of other systems through their links.
 *
 * Written against the kernel's structural interface (`lookup`, `setRemoteRouter`, `name`),
 * so this file imports only types from src/actors.
 */
import type { ActorSystem, Ref } from '../actors/index.js'
import { createError, ErrorCodes } from '../errors.js'
import type { Link, LinkHandler } from './link.js'
import type { StreamReader } from './stream-reader.js'

/** A Ref whose actor lives on the other side of `link`. */
export interface RemoteRef<M = unknown> extends Ref<M> {
  readonly link: Link
}

class RemoteRefImpl<M> implements RemoteRef<M> {
  constructor (readonly link: Link, readonly address: string) {}

  /**
   * Sends a tell frame. True when the frame was queued on the link (delivery is at-most-once);
   * false when it was not: the link is closed, over its hard buffer cap, or the message would
   * not encode. A link above its high-water mark still queues: watch `link.writable` and
   * 'drain' to pace a flood.
   */
  tell (message: M, sender?: Ref): boolean {
    try {
      this.link.tell(this.address, message, sender?.address)
      return true
    } catch {
      return false
    }
  }

  /**
   * Sends a request frame and waits for the reply. The remote actor's rejection arrives as a
   * WarrenError with the same code.
   */
  ask<R = unknown> (message: M, options?: { timeoutMs?: number }): Promise<R> {
    return this.link.request<R>(this.address, message, options?.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs })
  }

  /** Serialises as its address, like the kernel's local refs. */
  toJSON (): string { return this.address }
}

/**
 * A Ref for actor `address` reached through `link`.
 * @param link a client or server link
 * @param address `${systemName}/${path}` on the other side
 */
export function createRemoteRef<M = unknown> (link: Link, address: string): RemoteRef<M> {
  return new RemoteRefImpl<M>(link, address)
}

/** The handler `exposeSystem` returns; pass it as `handler` to a link server or client. */
export interface SystemHandler extends LinkHandler {
  /** Incoming tells that reached no actor (unknown address, refused by the mailbox, or disallowed). */
  readonly deadLetters: number
}

export interface ExposeOptions {
  /** Which local addresses the peer may reach; default every actor of the system. */
  allow?: (address: string, link: Link) => boolean
  /**
   * What to do with a stream the peer opens. Default: the StreamReader itself is told to the
   * actor at `reader.to` (check with `isStreamReader`); no such actor cancels the stream.
   */
  onStream?: (reader: StreamReader, link: Link) => void
}

/** True when a message is a StreamReader (what `exposeSystem` tells an actor for an incoming stream). */
export function isStreamReader (message: unknown): message is StreamReader {
  return message !== null && typeof message === 'object' &&
    typeof (message as StreamReader).read === 'function' && typeof (message as StreamReader).cancel === 'function' &&
    Symbol.asyncIterator in message
}

/** The part of ActorSystem this file uses (kept structural so the two folders stay loosely coupled). */
type SystemLike = Pick<ActorSystem, 'lookup'>

/**
 * Makes the link handler that exposes a local ActorSystem to the peer: tells go to
 * `system.lookup(to)` (with a RemoteRef back to the sender when the frame names one), requests
 * are asked of it and answered (its rejection crosses with its code); an unknown address
 * answers WARREN_ERR_NO_SUCH_ACTOR.
 * @param system the local actor system
 * @param options address filter and stream delivery
 */
export function exposeSystem (system: SystemLike, options: ExposeOptions = {}): SystemHandler {
  let deadLetters = 0
  const find = (to: string, link: Link): Ref | undefined =>
    options.allow !== undefined && !options.allow(to, link) ? undefined : system.lookup(to)
  return {
    get deadLetters () { return deadLetters },
    tell (to, message, from, link) {
      const ref = find(to, link)
      if (ref === undefined || !ref.tell(message, from === undefined ? undefined : createRemoteRef(link, from))) deadLetters++
    },
    request (to, message, _from, link, timeoutMs) {
      const ref = find(to, link)
      if (ref === undefined) throw createError(ErrorCodes.NO_SUCH_ACTOR, `no actor at ${to}`, { address: to })
      return ref.ask(message, timeoutMs === undefined ? undefined : { timeoutMs })
    },
    stream (reader, link) {
      if (options.onStream !== undefined) {
        options.onStream(reader, link)
        return
      }
      const ref = find(reader.to, link)
      if (ref === undefined || !ref.tell(reader)) {
        reader.cancel(createError(ErrorCodes.NO_SUCH_ACTOR, `no actor at ${reader.to} takes streams`, { address: reader.to }))
      }
    }
  }
}

/**
 * Installs the kernel's remote router: `system.refFor(address)` of another system's actor returns
 * a RemoteRef over the link `linkFor` picks for that system.
 * @param system the local system (its `setRemoteRouter` hook)
 * @param linkFor the link to a system by name, or undefined when there is no route
 * @returns a function that uninstalls the router
 */
export function routeRemote (system: Pick<ActorSystem, 'setRemoteRouter'>, linkFor: (systemName: string) => Link | undefined): () => void {
  const cache = new WeakMap<Link, Map<string, RemoteRef>>()
  system.setRemoteRouter((address) => {
    const slash = address.indexOf('/')
    if (slash <= 0) return undefined
    const link = linkFor(address.slice(0, slash))
    if (link === undefined || link.state === 'closed') return undefined
    let refs = cache.get(link)
    if (refs === undefined) cache.set(link, refs = new Map())
    let ref = refs.get(address)
    if (ref === undefined) {
      // Bounded: a link's cache is dropped with the link; addresses are few per peer in practice.
      if (refs.size >= 10_000) refs.clear()
      refs.set(address, ref = createRemoteRef(link, address))
    }
    return ref
  })
  return () => system.setRemoteRouter(undefined)
}
