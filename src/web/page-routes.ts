/**
 * The live page's HTTP routes on the control plane's port: `/ui/` serves the page built by
 * `npm run build` (scripts/build-page.mjs bundles src/web/page into dist/page), `/` sends a
 * browser there. The page holds no data: it logs in over the same WebSocket the SDK uses, with
 * the key the user pastes, and asks its figures as requests (docs/protocol.md, `cluster-stats`).
 *
 * Every answer carries a Content-Security-Policy allowing only this origin's script, style and
 * WebSocket (no inline script, no eval, no framing), so a string a sandbox printed and the page
 * shows can never run as code, and the key in the page's sessionStorage cannot be read by script
 * from anywhere else.
 */
import { readFileSync } from 'node:fs'
import { createHash } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const PageDefaults = {
  /** Where the page lives on the port. */
  prefix: '/ui/',
  /** The built page, from dist/src/web/ (this file, compiled) to dist/page. */
  dir: join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'page')
}

/** The files of the built page, and their types: nothing else under the prefix is served. */
const FILES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8'
}

/**
 * The policy: this origin only. `connect-src 'self'` covers the WebSocket back to this host and
 * port in current browsers; `style-src 'self'` refuses inline style attributes in markup (the
 * charts set styles through the CSSOM, which the policy allows).
 */
export const PAGE_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "img-src 'self' data:",
  "font-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'"
].join('; ')

const SECURITY_HEADERS = {
  'Content-Security-Policy': PAGE_CSP,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin'
}

interface Asset { body: Buffer, type: string, etag: string }

export interface PageRoutes {
  /** Answers a request for the page and returns true, or returns false for a path that is not the page's. */
  handle (req: IncomingMessage, res: ServerResponse): boolean
}

/**
 * Creates the page's routes. The built files are read once, at their first request (a few
 * hundred KiB, a fixed set), so serving them costs no disk reads after that.
 * @param dir where the built page is (PageDefaults.dir unless given: tests may point elsewhere)
 */
export function createPageRoutes (dir = PageDefaults.dir): PageRoutes {
  const cache = new Map<string, Asset>()
  const asset = (name: string): Asset | null => {
    const cached = cache.get(name)
    if (cached !== undefined) return cached
    try {
      const body = readFileSync(join(dir, name))
      const a = { body, type: FILES[name]!, etag: `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"` }
      cache.set(name, a)
      return a
    } catch {
      return null // not built: answered 404, and looked for again next time
    }
  }

  return {
    handle (req, res) {
      const path = (req.url ?? '/').split('?')[0]!
      if (path !== '/' && path !== '/ui' && !path.startsWith(PageDefaults.prefix)) return false
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        send(res, 405, 'text/plain; charset=utf-8', Buffer.from('the page answers GET and HEAD only\n'), req.method, { Allow: 'GET, HEAD' })
        return true
      }
      if (path === '/' || path === '/ui') {
        send(res, 302, 'text/plain; charset=utf-8', Buffer.from(`see ${PageDefaults.prefix}\n`), req.method, { Location: PageDefaults.prefix })
        return true
      }
      const name = path === PageDefaults.prefix ? 'index.html' : path.slice(PageDefaults.prefix.length)
      const a = Object.prototype.hasOwnProperty.call(FILES, name) ? asset(name) : null
      if (a === null) {
        const why = name === 'index.html' ? 'the page is not built (npm run build makes dist/page)\n' : 'no such file\n'
        send(res, 404, 'text/plain; charset=utf-8', Buffer.from(why), req.method)
        return true
      }
      if (req.headers['if-none-match'] === a.etag) {
        res.writeHead(304, { ...SECURITY_HEADERS, ETag: a.etag, 'Cache-Control': 'no-cache' }).end()
        return true
      }
      send(res, 200, a.type, a.body, req.method, { ETag: a.etag, 'Cache-Control': 'no-cache' })
      return true
    }
  }
}

function send (res: ServerResponse, status: number, type: string, body: Buffer, method: string | undefined, extra: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': type, 'Content-Length': String(body.length), ...extra })
  res.end(method === 'HEAD' ? undefined : body)
}
