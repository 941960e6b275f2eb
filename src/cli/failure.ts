/**
 * How a failed command reads on stderr: one line, the public code and a message naming the
 * cause, never a stack trace. A socket error from node (a busy port, a refused connection)
 * names its address and port.
 */
import { isWarrenError } from '../errors.js'

/** A socket error as node gives it: `connect ECONNREFUSED 127.0.0.1:1` with its parts. */
type SystemError = NodeJS.ErrnoException & { code: string, address?: string, port?: number }

const SYSTEM_CAUSES: Record<string, string> = {
  EADDRINUSE: 'the address is in use',
  EADDRNOTAVAIL: 'the address is not one of this machine\'s',
  EACCES: 'permission denied',
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'no route to the host',
  ENOTFOUND: 'the name does not resolve',
  ENOENT: 'no such file or directory',
  EPIPE: 'the reader went away'
}

/** Why a socket or file call failed, in words, with node's code: `connection refused (ECONNREFUSED)`. */
export function systemCause (err: NodeJS.ErrnoException): string {
  const cause = err.code !== undefined ? SYSTEM_CAUSES[err.code] : undefined
  return cause !== undefined ? `${cause} (${err.code})` : err.message
}

function isSystemError (err: unknown): err is SystemError {
  const code: unknown = (err as { code?: unknown } | null)?.code
  return err instanceof Error && typeof code === 'string' && /^E[A-Z]+$/.test(code)
}

/** The line `warren` prints for `err` (without the `warren: ` prefix). */
export function describeFailure (err: unknown): string {
  if (isWarrenError(err)) return `${err.code}: ${err.message}`
  if (isSystemError(err)) {
    const where = err.address !== undefined ? ` ${err.address}${err.port !== undefined ? ` port ${err.port}` : ''}` : ''
    return where !== '' ? `${err.syscall ?? 'socket'}${where}: ${systemCause(err)}` : err.message
  }
  return err instanceof Error ? err.message : String(err)
}
