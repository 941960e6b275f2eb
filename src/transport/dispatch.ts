/**
 * What a link does with each valid frame from its peer, once the handshake is done. One switch,
 * so the whole receiving side of the protocol reads top to bottom.
 */
import { createError, ErrorCodes, fromWireError, toWireError } from '../errors.js'
import type { Frame, OpenFrame, RequestFrame } from './frames.js'
import type { LinkCore } from './link.js'

/**
 * Acts on one frame. Never throws: a misbehaving handler or a frame out of turn is answered
 * on the wire, never by crashing the process.
 * @param link the link the frame arrived on
 * @param f a frame that passed `parseFrame`
 */
export function dispatchFrame (link: LinkCore, f: Frame): void {
  switch (f.k) {
    case 'tell':
      try {
        link.handler?.tell?.(f.to, f.m, f.from, link)
      } catch { /* a tell is fire-and-forget: a throwing handler is the receiver's dead letter, not the link's problem */ }
      return
    case 'request':
      handleRequest(link, f)
      return
    case 'reply':
      link.requests.resolve(f.id, f.m)
      return
    case 'error':
      if (f.id !== undefined) link.requests.reject(f.id, fromWireError(f.err))
      else link.emit('peer-error', fromWireError(f.err))
      return
    case 'open':
      handleOpen(link, f)
      return
    case 'data':
      link.readers.get(f.sid)?.onData(f.seq, f.d)
      return
    case 'end':
      link.readers.get(f.sid)?.onEnd(f.seq, f.err)
      return
    case 'credit':
      link.writers.get(f.sid)?.onCredit(f.ack, f.win)
      return
    case 'cancel':
      link.writers.get(f.sid)?.onCancel(f.err)
      return
    case 'resume':
      if (link.awaitingResume) link.resumeStreams(f.streams)
      else link.refuse(ErrorCodes.PROTOCOL_VIOLATION, 'resume frame out of turn')
      return
    case 'ping':
      link.pushQuietly({ k: 'pong' })
      return
    case 'pong':
      return
    case 'bye':
      link.shutdown(f.err === undefined ? undefined : fromWireError(f.err), false)
      return
    case 'auth':
    case 'welcome':
      link.refuse(ErrorCodes.PROTOCOL_VIOLATION, `${f.k} frame after the handshake`)
  }
}

function handleRequest (link: LinkCore, f: RequestFrame): void {
  const handler = link.handler?.request
  if (handler === undefined) {
    replyError(link, f.id, createError(ErrorCodes.NO_SUCH_ACTOR, `no actors are reachable through this link (asked ${f.to})`, { address: f.to }))
    return
  }
  if (link.incoming >= link.options.maxIncomingRequests) {
    // The hint is coarse on purpose: a full link frees a slot as soon as any request completes.
    replyError(link, f.id, createError(ErrorCodes.OVERLOADED, `${link.options.maxIncomingRequests} requests already being handled`, { limit: link.options.maxIncomingRequests, retryAfterMs: 10 }))
    return
  }
  let result: unknown
  try {
    result = handler(f.to, f.m, f.from, link, f.t)
  } catch (err) {
    replyError(link, f.id, err)
    return
  }
  if (result !== null && typeof result === 'object' && typeof (result as PromiseLike<unknown>).then === 'function') {
    link.incoming++
    ;(result as PromiseLike<unknown>).then(
      (value) => { link.incoming--; reply(link, f.id, value) },
      (err: unknown) => { link.incoming--; replyError(link, f.id, err) }
    )
    return
  }
  reply(link, f.id, result)
}

function reply (link: LinkCore, id: number, value: unknown): void {
  if (link.state === 'closed') return
  try {
    link.outbox.push({ k: 'reply', id, m: value })
  } catch (err) {
    // The value would not encode or is too large: the asker gets that error instead of a timeout.
    replyError(link, id, err)
  }
}

function replyError (link: LinkCore, id: number, err: unknown): void {
  if (link.state === 'closed') return
  link.pushQuietly({ k: 'error', id, err: toWireError(err) })
}

function handleOpen (link: LinkCore, f: OpenFrame): void {
  if (link.readers.has(f.sid)) {
    link.refuse(ErrorCodes.PROTOCOL_VIOLATION, `stream ${f.sid} is already open`)
    return
  }
  const handler = link.handler?.stream
  const refusal = handler === undefined
    ? createError(ErrorCodes.NO_SUCH_ACTOR, `no stream consumer for ${f.to} on this link`, { address: f.to })
    : link.readers.size >= link.options.maxStreams
      ? createError(ErrorCodes.OVERLOADED, `${link.options.maxStreams} streams already open`, { limit: link.options.maxStreams })
      : undefined
  if (refusal !== undefined) {
    link.pushQuietly({ k: 'cancel', sid: f.sid, err: toWireError(refusal) })
    return
  }
  const reader = link.acceptStream(f.sid, f.to, f.meta)
  try {
    handler!(reader, link)
  } catch (err) {
    reader.cancel(err)
  }
}
