/**
 * The function backend's files: a function sandbox is a call in a worker, with no file system
 * of its own to read or write, so every file operation is refused as unsupported.
 */
import { createError, ErrorCodes } from '../../errors.js'
import type { SandboxFiles } from '../types.js'

function refuse (): Promise<never> {
  return Promise.reject(createError(ErrorCodes.UNSUPPORTED, 'function sandboxes have no files', { backend: 'function' }))
}

/** Every call rejects with WARREN_ERR_UNSUPPORTED. */
export const noFiles: SandboxFiles = {
  maxChunkBytes: 0,
  read: refuse,
  write: refuse,
  list: refuse,
  stat: refuse,
  mkdir: refuse,
  remove: refuse,
  rename: refuse,
  symlink: refuse
}
