/**
 * A VM's memory snapshot (`Backend.snapshot` with `memory`): its vCPUs stopped, its whole
 * machine state (devices, vCPUs and all of its RAM) saved by QEMU's migration to a file, the VM
 * run again. The writable layer is a tmpfs inside the guest's RAM, so the disk and the memory are
 * cut at the same instant by the same save; the read-only layers are the sandbox's own, and a
 * VM restored from the state (vm-launch.ts `fromMemory`) is given the same ones. What ran in the
 * guest runs on in every VM restored from it: same processes, same pids, same files.
 *
 * The file is named by its digest in the node's layer store (`<hex>.vmstate`), so forks on this
 * node start from it at once, and nodes that lack it fetch it from the blob store by digest.
 * Bounded before anything is written: a guest whose memory is past the cluster's snapshot bound
 * is refused (QUOTA, naming `memory`), and the stream is cut if it outgrows the memory.
 */
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { nanoid } from 'nanoid'
import { createError, ErrorCodes } from '../../errors.js'
import { ContainerDefaults } from '../container/defaults.js'
import type { SnapshotLayer } from '../types.js'
import { saveVmState, STATE_SLACK_BYTES, stateTimeoutMs, type StateSource } from './vm-state.js'

/** The file name suffix of a saved state in the layer store. */
export const STATE_SUFFIX = 'vmstate'

/** What `saveMemorySnapshot` saves. */
export interface MemorySnapshotTarget extends StateSource {
  id: string
  vcpus: number
  memoryMiB: number
  /** What `machineOf` says of the VM's QEMU. */
  machine: string
}

const releases = new Map<string, Promise<string>>()

/**
 * The machine a VM runs on as a memory snapshot records it: accelerator, CPU model and QEMU's
 * release (major.minor: a stable update reads its series' streams), e.g. `tcg:max:qemu-7.2`.
 * QEMU's `-version` is asked once per path.
 */
export async function machineOf (accel: string, cpu: string, qemuPath: string): Promise<string> {
  let release = releases.get(qemuPath)
  if (release === undefined) {
    release = new Promise<string>((resolve) => {
      execFile(qemuPath, ['-version'], { timeout: 10_000, env: {} }, (err, stdout) => {
        resolve(err === null ? /version (\d+\.\d+)/.exec(stdout)?.[1] ?? 'unknown' : 'unknown')
      })
    })
    releases.set(qemuPath, release)
  }
  return `${accel}:${cpu}:qemu-${await release}`
}

/**
 * Saves the VM's state into `storeDir`, with `whileStopped` stopping its vCPUs around the save.
 * @throws WARREN_ERR_QUOTA naming `memory` when the guest's memory is past `maxBytes`
 */
export async function saveMemorySnapshot (vm: MemorySnapshotTarget, storeDir: string, opts: { whileStopped: <T>(work: () => Promise<T>) => Promise<T>, maxBytes?: number }): Promise<SnapshotLayer> {
  const maxBytes = opts.maxBytes ?? ContainerDefaults.snapshotMaxBytes
  const ramBytes = vm.memoryMiB * 1024 * 1024
  if (ramBytes > maxBytes) {
    throw createError(ErrorCodes.QUOTA, `VM ${vm.id} has ${vm.memoryMiB} MiB of memory: past the ${maxBytes} bytes a snapshot may hold`, { field: 'memory', id: vm.id, maxBytes })
  }
  // A dot name: adopt removes what a crash left of it, the store's listing ignores it.
  const tmp = join(storeDir, `.mem-${vm.id}-${nanoid(8).replace(/[^A-Za-z0-9]/g, 'x')}`)
  try {
    // Cut if it outgrows the memory: a guest cannot make its QEMU write more than that to the node's disk.
    await opts.whileStopped(async () => await saveVmState(vm, tmp, { ram: 'in-stream', timeoutMs: stateTimeoutMs('in-stream', vm.memoryMiB), maxBytes: ramBytes + STATE_SLACK_BYTES }))
    const { size } = await stat(tmp)
    const hex = await sha256File(tmp)
    const path = join(storeDir, `${hex}.${STATE_SUFFIX}`)
    await rename(tmp, path)
    return { digest: `sha256:${hex}`, path, bytes: size, memory: { vcpus: vm.vcpus, memoryMiB: vm.memoryMiB, machine: vm.machine } }
  } finally {
    await rm(tmp, { force: true }).catch(() => {})
  }
}

/** The hex SHA-256 of a file's content. */
async function sha256File (path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer)
  return hash.digest('hex')
}
