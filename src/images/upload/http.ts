/**
 * The HTTP plumbing of uploads: bounded request bodies and JSON answers. An error answers as
 * `{ code, message, details }` (the wire form of src/errors.ts) with a status the code maps to,
 * so an HTTP client gets the same WARREN_ERR_* codes an SDK request would.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createError, ErrorCodes, isWarrenError, toWireError, type ErrorCode } from '../../errors.js'

const STATUS: Partial<Record<ErrorCode, number>> = {
  [ErrorCodes.INVALID_ARGUMENT]: 400,
  [ErrorCodes.UNAUTHENTICATED]: 401,
  [ErrorCodes.FORBIDDEN]: 403,
  [ErrorCodes.NOT_FOUND]: 404,
  [ErrorCodes.QUOTA]: 429,
  [ErrorCodes.OVERLOADED]: 503,
  [ErrorCodes.NO_CAPACITY]: 507,
  [ErrorCodes.TIMEOUT]: 408
}

/** Sends `body` as JSON. */
export function sendJson (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent || res.destroyed) return
  const text = JSON.stringify(body)
  res.writeHead(status, { ...headers, 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(text)) })
  res.end(text)
}

/** Answers with an error's wire form; anything not a WarrenError is INTERNAL, without its stack. */
export function sendError (res: ServerResponse, err: unknown): void {
  const wire = isWarrenError(err) ? toWireError(err) : toWireError(createError(ErrorCodes.INTERNAL, 'the blob store failed on this upload'))
  const tooLarge = wire.details?.reason === 'too-large'
  const status = tooLarge ? 413 : STATUS[wire.code as ErrorCode] ?? 500
  const headers: Record<string, string> = {}
  if (status === 401) headers['WWW-Authenticate'] = 'Bearer realm="warren-uploads"'
  const retry = wire.details?.retryAfterMs
  if (typeof retry === 'number') headers['Retry-After'] = String(Math.max(1, Math.ceil(retry / 1000)))
  // A refused body may still be on its way: close rather than read gigabytes nobody wants.
  if (tooLarge) headers.Connection = 'close'
  sendJson(res, status, wire, headers)
}

/**
 * The whole body of a request, at most `max` bytes, within `timeoutMs`.
 * @throws WARREN_ERR_INVALID_ARGUMENT (field `body`, reason `too-large`) past `max`, before
 *   reading it when Content-Length says so; WARREN_ERR_TIMEOUT when it does not arrive in time
 */
export function readBody (req: IncomingMessage, max: number, timeoutMs: number): Promise<Buffer> {
  const tooLarge = (): Error => createError(ErrorCodes.INVALID_ARGUMENT, `a request body may hold at most ${max} bytes`, { field: 'body', reason: 'too-large', max })
  const declared = req.headers['content-length']
  if (declared !== undefined && Number(declared) > max) return Promise.reject(tooLarge())
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = []
    let size = 0
    const done = (err: Error | undefined, body?: Buffer): void => {
      clearTimeout(timer)
      req.off('data', onData).off('end', onEnd).off('error', onError).off('aborted', onAborted)
      if (err !== undefined) reject(err)
      else resolve(body!)
    }
    const timer = setTimeout(() => { done(createError(ErrorCodes.TIMEOUT, `the request body did not arrive within ${timeoutMs} ms`)); req.destroy() }, timeoutMs)
    const onData = (b: Buffer): void => {
      size += b.length
      if (size > max) { done(tooLarge()); req.pause(); return }
      parts.push(b)
    }
    const onEnd = (): void => done(undefined, parts.length === 1 ? parts[0]! : Buffer.concat(parts, size))
    const onError = (err: Error): void => done(err)
    const onAborted = (): void => done(createError(ErrorCodes.INVALID_ARGUMENT, 'the client went away mid-body', { field: 'body' }))
    req.on('data', onData).on('end', onEnd).on('error', onError).on('aborted', onAborted)
  })
}
