/** The small helpers every route of src/web answers with. */
import type { IncomingMessage, ServerResponse } from 'node:http'

/** Answers with a short plain-text body (probes and people read these). */
export function text (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': String(Buffer.byteLength(body)), 'Cache-Control': 'no-store', ...headers })
  res.end(body)
}

/** True for GET and HEAD; anything else is answered 405 here. */
export function readOnly (req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method === 'GET' || req.method === 'HEAD') return true
  text(res, 405, 'only GET and HEAD\n', { Allow: 'GET, HEAD' })
  return false
}

/** The request's path without its query string. */
export function pathOf (req: IncomingMessage): string {
  const url = req.url ?? '/'
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}
