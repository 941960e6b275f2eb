/**
 * Sequential read throughput through the layer file system, against a tmpfs file of the same
 * bytes, measured in the same run. Not a test (nothing to assert on a machine-dependent figure):
 *
 *   node dist/test/images/fuse/measure-throughput.js [MiB=256] [rounds=5]
 *
 * The reader is dd(1) in a child process with 1 MiB blocks, as a sandbox would be. Each round
 * mounts afresh, so "cold" is every byte going through FUSE (kernel → our reader thread → the
 * event loop → the in-memory `read` → one writev); "warm" is the second read of the same mount,
 * from the page cache the file system keeps (FOPEN_KEEP_CACHE). Prints one JSON line.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { mountLayerFs } from '../../../src/images/fuse/index.js'
import { readMountinfo } from '../../../src/images/fuse/mount.js'

const MiB = 1024 * 1024

/** MB/s (10^6 bytes) of `dd if=path bs=1M` reading `bytes`. */
function ddRate (path: string, bytes: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint()
    const dd = spawn('dd', [`if=${path}`, 'of=/dev/null', 'bs=1M'], { stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    dd.stderr.on('data', (b: Buffer) => { err += b.toString() })
    dd.once('close', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9
      if (code === 0) resolve(bytes / 1e6 / seconds)
      else reject(new Error(`dd failed: ${err}`))
    })
  })
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return Math.round(s[Math.floor(s.length / 2)]!)
}

async function main (): Promise<void> {
  const mib = Number(process.argv[2] ?? 256)
  const rounds = Number(process.argv[3] ?? 5)
  const size = mib * MiB
  const data = Buffer.alloc(size)
  for (let i = 0; i < size; i += 8) data.writeUInt32LE(i >>> 3, i) // not all zeros, cheap to make

  const shm = readMountinfo().find((m) => m.mountPoint === '/dev/shm')
  if (shm?.fsType !== 'tmpfs') throw new Error('/dev/shm is not a tmpfs here')
  const tmpfsFile = join('/dev/shm', `warren-fuse-throughput-${process.pid}`)
  writeFileSync(tmpfsFile, data)
  const dir = mkdtempSync(join(tmpdir(), 'warren-fuse-'))
  const cold: number[] = []
  const warm: number[] = []
  const tmpfs: number[] = []
  try {
    for (let r = 0; r < rounds; r++) {
      const mountpoint = join(dir, `mnt-${r}`)
      mkdirSync(mountpoint)
      const fs = await mountLayerFs({ mountpoint, files: [{ name: 'layer', size }], read: async (_n, offset, length) => data.subarray(offset, offset + length) })
      try {
        cold.push(await ddRate(join(mountpoint, 'layer'), size))
        warm.push(await ddRate(join(mountpoint, 'layer'), size))
        tmpfs.push(await ddRate(tmpfsFile, size))
      } finally {
        await fs.unmount()
      }
    }
  } finally {
    rmSync(tmpfsFile, { force: true })
    rmSync(dir, { recursive: true, force: true })
  }
  console.log(JSON.stringify({
    measure: 'fuse-throughput',
    mib,
    rounds,
    fuse_cold_mb_s: median(cold),
    fuse_warm_mb_s: median(warm),
    tmpfs_mb_s: median(tmpfs),
    cold_over_tmpfs: Math.round((median(cold) / median(tmpfs)) * 100) / 100,
    all: { cold: cold.map(Math.round), warm: warm.map(Math.round), tmpfs: tmpfs.map(Math.round) }
  }))
}

await main()
