/**
 * Fixtures for the FUSE tests: temp dirs that are never removed while something is mounted in
 * them, layer file systems served from memory, EROFS mounts of a served file, and the mountinfo
 * checks that nothing is left behind.
 */
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import { run } from '../../../src/images/index.js'
import { FuseDefaults, mountLayerFs, type LayerFs, type LayerRead, type MountLayerFsOptions } from '../../../src/images/fuse/index.js'
import { abortConnectionSync, connectionId, readMountinfo, type MountEntry } from '../../../src/images/fuse/mount.js'
import type { Cleanup } from '../../support/index.js'

/** Every temp dir of these tests starts so. */
export const PREFIX = 'warren-fuse-'
/** The subtype the tests mount with (`fuse.warren-test` in mountinfo). */
export const SUBTYPE = 'warren-test'
/** The source this process's layer mounts show, so that test files run side by side tell theirs apart. */
export const SOURCE = `warren-test-${process.pid}`
/** The temp dirs this process made: every mount of these tests is under one, or has SOURCE. */
const ourDirs = new Set<string>()

/** Why these tests cannot run here, if they cannot. */
export const skipReason: string | undefined =
  process.getuid?.() !== 0
    ? 'not root (mounting needs CAP_SYS_ADMIN)'
    : !existsSync('/dev/fuse') ? '/dev/fuse is missing' : undefined

/** Registers a test that needs root and /dev/fuse, or skips it (the reason is printed once). */
export function rootTest (name: string, fn: () => Promise<void>): void {
  if (skipReason === undefined) test(name, fn)
  else test.skip(name, fn)
}
if (skipReason !== undefined) process.stderr.write(`FUSE tests skipped: ${skipReason}\n`)

/** The mounts this test process made (and any child of it mounted under its dirs) still there. */
export function testMounts (): MountEntry[] {
  return readMountinfo().filter((m) => m.source === SOURCE || [...ourDirs].some((d) => m.mountPoint.startsWith(d + '/')))
}

/**
 * A fresh temp dir. At the end of the test anything still mounted under it is detached first
 * (deepest first), so removing it can never reach into a mount.
 */
export function tempDir (defer: Cleanup['defer']): string {
  const dir = mkdtempSync(join(tmpdir(), PREFIX))
  ourDirs.add(dir)
  defer(async () => {
    const inside = readMountinfo().filter((m) => m.mountPoint.startsWith(dir + '/'))
    for (const m of inside.reverse()) {
      // A FUSE mount nobody serves any more would hang whoever touches it: abort it first.
      if (m.fsType.startsWith('fuse')) abortConnectionSync(connectionId(m), FuseDefaults.fusectlDir)
      await run('umount', ['-l', m.mountPoint]).catch(() => undefined)
    }
    rmSync(dir, { recursive: true, force: true })
  })
  return dir
}

/** Serves `files` (name → bytes) from memory. */
export function memoryRead (files: ReadonlyMap<string, Uint8Array>): LayerRead {
  return async (name, offset, length) => {
    const data = files.get(name)
    if (data === undefined) throw new Error(`no file ${name}`)
    return data.subarray(offset, offset + length)
  }
}

/**
 * Mounts a layer file system in a new dir under `root`, unmounted when the test ends.
 * @param files name → bytes; sizes come from them
 */
export async function mountMemory (
  defer: Cleanup['defer'], root: string, files: ReadonlyMap<string, Uint8Array>, options: Partial<MountLayerFsOptions> = {}
): Promise<LayerFs> {
  const mountpoint = join(root, `mnt-${Math.random().toString(36).slice(2, 8)}`)
  mkdirSync(mountpoint)
  const fs = await mountLayerFs({
    mountpoint,
    subtype: SUBTYPE,
    source: SOURCE,
    files: () => [...files].map(([name, data]) => ({ name, size: data.byteLength })),
    read: memoryRead(files),
    ...options
  })
  defer(() => fs.unmount())
  return fs
}

/** `size` pseudo-random bytes, the same for the same seed (xorshift32, a word at a time). */
export function seededBytes (size: number, seed: number): Buffer {
  const out = Buffer.alloc(size)
  let x = (seed >>> 0) || 1
  const words = Math.floor(size / 4)
  for (let i = 0; i < words; i++) {
    x ^= x << 13; x >>>= 0
    x ^= x >>> 17
    x ^= x << 5; x >>>= 0
    out.writeUInt32LE(x, i * 4)
  }
  for (let i = words * 4; i < size; i++) out[i] = (x >>> ((i % 4) * 8)) & 0xff
  return out
}

export function sha256 (data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex')
}

/**
 * Mounts the EROFS image `file` on `dir` read-only. First file-backed, with mount(2) itself (here
 * through perl's syscall(), since Node has no mount(2) and mount(8) would set up a loop device
 * for any regular file), then mount(8) with `-o loop`.
 * @returns which of the two worked
 */
export async function mountErofs (file: string, dir: string): Promise<'file-backed' | 'loop'> {
  try {
    await run('perl', ['-e', PERL_MOUNT, file, dir, 'erofs'])
    return 'file-backed'
  } catch (err) {
    process.stderr.write(`file-backed EROFS mount failed (${(err as Error).message}); trying a loop device\n`)
  }
  await run('mount', ['-t', 'erofs', '-o', 'ro,loop', file, dir])
  return 'loop'
}

// mount(2) with MS_RDONLY (1) and no data; the syscall number from syscall.ph when perl has its
// headers, else the known one for the machine.
const PERL_MOUNT = `
use POSIX ();
my ($src, $dst, $type) = @ARGV;
my $nr = eval { require 'syscall.ph'; &SYS_mount() };
$nr //= { x86_64 => 165, aarch64 => 40, riscv64 => 40 }->{ (POSIX::uname())[4] };
defined $nr or die "no mount(2) number for this machine\\n";
syscall($nr, $src, $dst, $type, 1, 0) == 0 or die "mount(2): $!\\n";
`
