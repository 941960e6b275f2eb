/**
 * Rewrites an EROFS image's build time to a fixed value, for images that keep every file's own
 * mtime. erofs-utils 1.5 has no way to fix the build time without also giving every file that
 * time (`-T` forces both), and without `-T` it stamps the superblock with the current time, so
 * the same tree would give a new digest each build. Built with every inode extended (each holds
 * its own mtime; only compact inodes take the superblock's), the build time is read by nothing
 * but statfs, and setting it afterwards changes no file. The superblock checksum
 * (crc32c, when the image has one) is computed again.
 *
 * Layout (include/erofs_fs.h): the superblock sits at byte 1024, magic 0xe0f5e1e2, then
 * checksum u32, feature_compat u32 (bit 0: checksum present), blkszbits u8, sb_extslots u8,
 * root_nid u16, inos u64, build_time u64 at +24, build_time_nsec u32 at +32; the checksum
 * covers the superblock to the end of block 0, with its own field zeroed, as the kernel's
 * `crc32c(~0, …)` (no final inversion).
 */
import { open } from 'node:fs/promises'
import { createError, ErrorCodes } from '../errors.js'

const SB_OFFSET = 1024
const MAGIC = 0xe0f5e1e2
const COMPAT_SB_CHKSUM = 0x1

let table: Uint32Array | undefined
function crc32c (data: Uint8Array, seed: number): number {
  if (table === undefined) {
    table = new Uint32Array(256)
    for (let i = 0; i < 256; i++) {
      let c = i
      for (let k = 0; k < 8; k++) c = (c & 1) !== 0 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1
      table[i] = c >>> 0
    }
  }
  let c = seed >>> 0
  for (const b of data) c = table[(c ^ b) & 0xff]! ^ (c >>> 8)
  return c >>> 0
}

/**
 * Sets the build time of the EROFS image at `path` to `epoch` seconds (nanoseconds 0), in place.
 * @throws WARREN_ERR_INTERNAL when the file is not an EROFS image
 */
export async function pinErofsBuildTime (path: string, epoch: number): Promise<void> {
  const fh = await open(path, 'r+')
  try {
    const head = Buffer.alloc(SB_OFFSET + 64)
    await fh.read(head, 0, head.length, 0)
    if (head.readUInt32LE(SB_OFFSET) !== MAGIC) throw createError(ErrorCodes.INTERNAL, `${path} is not an EROFS image`)
    const blockBytes = 2 ** head.readUInt8(SB_OFFSET + 12)
    if (blockBytes < SB_OFFSET + 128) throw createError(ErrorCodes.INTERNAL, `${path} has ${blockBytes}-byte blocks; the superblock checksum rule here assumes 4 KiB`)
    const sb = Buffer.alloc(blockBytes - SB_OFFSET)
    await fh.read(sb, 0, sb.length, SB_OFFSET)
    sb.writeBigUInt64LE(BigInt(epoch), 24)
    sb.writeUInt32LE(0, 32)
    if ((sb.readUInt32LE(8) & COMPAT_SB_CHKSUM) !== 0) {
      sb.writeUInt32LE(0, 4)
      sb.writeUInt32LE(crc32c(sb, 0xffffffff), 4)
    }
    await fh.write(sb, 0, sb.length, SB_OFFSET)
  } finally {
    await fh.close()
  }
}
