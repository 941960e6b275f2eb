/**
 * A writer of the cpio "newc" format (the kernel's initramfs format, Documentation/
 * driver-api/early-userspace/buffer-format.rst): per entry a 110-byte ASCII header of thirteen
 * 8-digit hex fields, the NUL-terminated name, the data, each padded to 4 bytes; a
 * `TRAILER!!!` entry ends the archive. Entries are written in the order given, with fixed
 * owners and timestamps, so the same entries always give the same bytes.
 */

/** One archive entry. Directories must come before what they hold. */
export type CpioEntry =
  | { type: 'dir', path: string, mode?: number }
  | { type: 'file', path: string, data: Uint8Array, mode?: number }
  | { type: 'char', path: string, major: number, minor: number, mode?: number }

const S_IFDIR = 0o040000
const S_IFREG = 0o100000
const S_IFCHR = 0o020000

function hex8 (n: number): string {
  return n.toString(16).padStart(8, '0')
}

function pad4 (n: number): number {
  return (4 - (n % 4)) % 4
}

function entryBytes (ino: number, name: string, mode: number, data: Uint8Array, rdev: [number, number]): Buffer[] {
  const nameBytes = Buffer.from(`${name}\0`, 'utf8')
  const fields = [
    ino, mode, 0 /* uid */, 0 /* gid */, (mode & S_IFDIR) === S_IFDIR ? 2 : 1, 0 /* mtime */, data.length,
    0, 0 /* dev major, minor */, rdev[0], rdev[1], nameBytes.length, 0 /* check */
  ]
  const header = Buffer.from(`070701${fields.map(hex8).join('')}`, 'ascii')
  const out: Buffer[] = [header, nameBytes, Buffer.alloc(pad4(header.length + nameBytes.length))]
  if (data.length > 0) out.push(Buffer.from(data.buffer, data.byteOffset, data.length), Buffer.alloc(pad4(data.length)))
  return out
}

/**
 * The archive of `entries`, paths relative to the root (no leading slash).
 * @throws Error for an absolute or empty path (a bug of the caller: entries are warren's own)
 */
export function writeCpio (entries: readonly CpioEntry[]): Buffer {
  const parts: Buffer[] = []
  let ino = 1
  for (const e of entries) {
    if (e.path === '' || e.path.startsWith('/')) throw new Error(`cpio path must be relative: ${JSON.stringify(e.path)}`)
    if (e.type === 'dir') parts.push(...entryBytes(ino++, e.path, S_IFDIR | (e.mode ?? 0o755), new Uint8Array(0), [0, 0]))
    else if (e.type === 'file') parts.push(...entryBytes(ino++, e.path, S_IFREG | (e.mode ?? 0o644), e.data, [0, 0]))
    else parts.push(...entryBytes(ino++, e.path, S_IFCHR | (e.mode ?? 0o600), new Uint8Array(0), [e.major, e.minor]))
  }
  parts.push(...entryBytes(0, 'TRAILER!!!', 0, new Uint8Array(0), [0, 0]))
  return Buffer.concat(parts)
}
