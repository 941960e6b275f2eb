/**
 * The file operations a client may ask of a sandbox, as they cross the wire (the session checks
 * their shape, `parseFileRequest` in the control plane), and the cluster's bounds on them.
 *
 * Nothing moves a whole file in one message: a read is a range of at most `maxChunkBytes`, and
 * a write is an upload (begin, chunks by offset, end), so the 1 MiB frame never limits a file's
 * size and the node never holds more of one than the chunks in flight.
 */
import { nameFromWire, type WireName } from '../../file-names.js'

const KiB = 1024
const MiB = 1024 * KiB

/** The cluster's bounds on files; one object so an operator (or a test) sees every knob. */
export const FilesDefaults = {
  /** The largest file a write makes or a read fetches (the `size` beyond it is refused). */
  maxFileBytes: 1024 * MiB,
  /** The most bytes one read returns or one chunk carries: under the 1 MiB frame with its envelope. */
  maxChunkBytes: 960 * KiB,
  /** Uploads (files or trees) one sandbox may have open at once. */
  maxOpenUploads: 16,
  /** An upload nothing arrives for in this long is dropped, its temporary file removed. */
  uploadIdleMs: 60_000,
  /**
   * How far ahead of the bytes received in order a chunk may start: chunks in flight may arrive
   * out of order, and the ones ahead wait (in memory, for the sha256) until the gap is filled.
   */
  uploadWindowBytes: 16 * MiB,
  /**
   * Chunks held ahead of a gap by all the uploads of a node together: they are the node's memory,
   * not the sandbox's, so one tenant's gaps must not take it all.
   */
  nodeAheadBytes: 64 * MiB,
  /** Finished uploads remembered, so an end retried after a reconnect gets its answer again. */
  rememberedUploads: 64,
  /** File requests carrying or fetching data that one connection may have in flight at once. */
  maxInflightChunks: 32,
  /** Downloads of trees (tar) one sandbox may have open at once. */
  maxOpenDownloads: 8,
  /** The longest upload or download id (the client picks it, so a retried begin is the same one). */
  maxTransferIdLength: 64,
  /**
   * What a listing's answer may hold, its names and their fields counted (about 64 bytes an
   * entry besides the name): past it the listing is cut (`truncated`), so it fits the 1 MiB frame
   * (10,000 entries with long names would not).
   */
  maxListBytes: 768 * KiB
}

/** The bounds in force, as a node may set them (the rest from `FilesDefaults`). */
export type FilesLimits = typeof FilesDefaults

/** How an upload's bytes are taken: one file, or a tar unpacked into a directory. */
export type UploadFormat = 'file' | 'tar'

/**
 * A file operation, shape-checked. `P` is how its paths are held: as they cross the wire
 * (`WireName`: a str, or the bytes of a name that is not UTF-8), or on the node, decoded with
 * its bytes escaped (see file-names.ts).
 */
export type FileRequestOf<P> =
  | { op: 'stat', path: P, follow?: boolean }
  | { op: 'list', path: P }
  /** Bytes `[offset, offset + length)` of a regular file (fewer at its end). */
  | { op: 'read', path: P, offset: number, length: number }
  | { op: 'mkdir', path: P, mode?: number, parents?: boolean }
  | { op: 'remove', path: P, recursive?: boolean }
  | { op: 'rename', path: P, to: P }
  /** Opens an upload to `path`: a file (written under a temporary name) or a tar unpacked there. Retried with the same id, the same upload. */
  | { op: 'write-begin', upload: string, path: P, format?: UploadFormat, mode?: number, size?: number }
  /** Bytes at `offset` of the upload: a chunk sent twice lands on the same bytes. */
  | { op: 'write-chunk', upload: string, offset: number, data: Uint8Array }
  /** Closes the upload: `size` (and `sha256`, hex, when given) must match what arrived; then the file takes its name. */
  | { op: 'write-end', upload: string, size: number, sha256?: string }
  | { op: 'write-abort', upload: string }
  /** Opens a download of `path` (a file or a directory tree) as a tar stream, read in numbered pages. */
  | { op: 'tar-begin', download: string, path: P }
  /** Page `seq` of a download; the page before it is kept, so a retried read gets it again. */
  | { op: 'tar-read', download: string, seq: number }
  | { op: 'tar-end', download: string }
  /**
   * Makes `path` a symlink holding `target`. Internal: only the control plane sends it (a replay
   * or restore re-applying a recorded `symlink` step); no client request parses to it.
   */
  | { op: 'symlink', path: P, target: P }

/** A file operation as it crosses the wire, from a client or the control plane to the node. */
export type FileRequest = FileRequestOf<WireName>
/** A file operation on the node, its paths decoded. */
export type LocalFileRequest = FileRequestOf<string>

/** The request with its paths decoded from their wire form. */
export function localFileRequest (r: FileRequest): LocalFileRequest {
  const out: Record<string, unknown> = { ...r }
  for (const key of ['path', 'to', 'target'] as const) {
    const v = (r as Partial<Record<typeof key, WireName>>)[key]
    if (v !== undefined) out[key] = nameFromWire(v)
  }
  return out as LocalFileRequest
}

export type FileOp = FileRequest['op']
/** The ops a client may ask for (every op but the control plane's own). */
export type ClientFileOp = Exclude<FileOp, 'symlink'>

/** Ops that only look: a key with `sandbox:read` may use them. */
export const READ_ONLY_FILE_OPS: readonly FileOp[] = ['stat', 'list', 'read', 'tar-begin', 'tar-read', 'tar-end']

/** Ops whose requests carry or fetch up to a chunk of data (bounded per connection in flight). */
export const DATA_FILE_OPS: readonly FileOp[] = ['read', 'write-chunk', 'tar-read']

/** What `write-begin` answers: where to go on from, and the bounds to keep to. */
export interface UploadState { received: number, maxChunkBytes: number, maxFileBytes: number }

/** What `write-end` answers. */
export interface UploadResult { size: number, sha256: string }

/** One page of a tar download; `done` on the last. */
export interface TarPage { seq: number, data: Uint8Array, done: boolean }
