/**
 * Cutting a VM's file system into an EROFS layer (`Backend.snapshot`), the same layer a
 * container's snapshot makes, by the same builder (container/snapshot.ts `buildStagedLayer`):
 * so a VM's snapshot stacks on its layers in a container as well as in a VM, and fork and
 * create-from-snapshot work through the control plane unchanged.
 *
 * The tree is inside the guest (its writable layer is a tmpfs in guest memory), so the agent
 * streams it out: the `tree` request writes a pax tar of the writable layer, or with `flatten`
 * of everything the guest sees from / but its other mounts, within output credit; GNU tar on
 * the host unpacks it into the staging directory as it arrives (owners, modes, mtimes, xattrs
 * such as overlay's opaque marks, whiteout devices, hardlinks), the commands frozen meanwhile.
 */
import { spawn } from 'node:child_process'
import { rmdir } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { createError, ErrorCodes } from '../../errors.js'
import type { AgentClient } from '../container/agent-client.js'
import { buildStagedLayer, snapshotBound, tooLargeToSnapshot, type SnapshotBound } from '../container/snapshot.js'
import type { SnapshotLayer } from '../types.js'
import { MicrovmDefaults } from './defaults.js'

/** Bytes of tar headers allowed beyond the tree's size before the stream is cut. */
const HEADER_SLACK = 64 * 1024 * 1024

/** What `cutVmSnapshot` needs besides the VM's agent. */
export interface VmCutOptions {
  flatten?: boolean
  /** Runs the stream with the guest's commands frozen (pause.ts). */
  whileFrozen: <T>(work: () => Promise<T>) => Promise<T>
  maxBytes?: number
  /** The size of its writable layer (0 or absent: not known as a bound). */
  diskMiB?: number
  /**
   * Mount points the guest made in its writable layer for the host's disks (the module tree's
   * `lib/modules/<release>`): left out of the layer when empty, and so are the parents they
   * alone filled, so a snapshot holds only what the sandbox wrote.
   */
  mountPoints?: readonly string[]
}

/**
 * Cuts the VM's writable layer (or its whole tree) into a layer in `storeDir`.
 * @throws WARREN_ERR_QUOTA past `maxBytes`; WARREN_ERR_BACKEND_UNAVAILABLE when the guest could not archive its tree
 */
export async function cutVmSnapshot (agent: AgentClient, id: string, storeDir: string, opts: VmCutOptions): Promise<SnapshotLayer> {
  // Its writes fit its writable layer (a plain snapshot): more, sparse files counted whole, is refused.
  const bound = snapshotBound(opts.maxBytes, opts.flatten === true || opts.diskMiB === undefined ? undefined : opts.diskMiB * 1024 * 1024)
  return await buildStagedLayer(storeDir, async (stage) => {
    await opts.whileFrozen(async () => await streamTree(agent, id, stage, opts.flatten === true, bound))
    for (const point of opts.mountPoints ?? []) await dropEmpty(stage, point)
    // The guest left the other mounts' contents out itself.
    return []
  }, bound)
}

/** Removes `stage/<path>` when it is an empty directory, then each parent it leaves empty. */
async function dropEmpty (stage: string, path: string): Promise<void> {
  for (let p = path.replace(/^\/+|\/+$/g, ''); p !== '' && p !== '.'; p = dirname(p)) {
    // rmdir removes only an empty directory: a parent holding anything else stays, and so does the rest.
    if (!await rmdir(join(stage, p)).then(() => true, () => false)) return
  }
}

/** The guest's tar, unpacked into `stage` as it comes. */
async function streamTree (agent: AgentClient, id: string, stage: string, flatten: boolean, bound: SnapshotBound): Promise<void> {
  const limit = bound.maxBytes + HEADER_SLACK
  const tar = spawn('tar', ['-x', '-C', stage, '-f', '-', '--xattrs', '--xattrs-include=*', '--numeric-owner', '--same-owner', '--same-permissions'], { stdio: ['pipe', 'ignore', 'pipe'] })
  let tarErr = ''
  tar.stderr.setEncoding('utf8').on('data', (s: string) => { if (tarErr.length < 4096) tarErr += s })
  const tarDone = new Promise<number>((resolve) => {
    tar.once('close', (code) => resolve(code ?? 1))
    tar.once('error', () => resolve(127))
  })
  tar.stdin.on('error', () => {}) // tar ending early is read from its exit below
  let guestErr = ''
  let streamed = 0
  const execution = agent.startTree({ flatten, windowBytes: MicrovmDefaults.treeWindowBytes }, {
    onStdout: (chunk) => {
      streamed += chunk.length
      if (streamed > limit) throw tooLargeToSnapshot(bound)
      // Credit goes back as tar takes the bytes: no more than the window is ever held here.
      tar.stdin.write(chunk, () => execution.grant(chunk.length))
    },
    onStderr: (chunk) => { if (guestErr.length < 4096) guestErr += new TextDecoder().decode(chunk) }
  })
  let result
  try {
    result = await execution.result
  } catch (err) {
    tar.kill('SIGKILL')
    await tarDone
    throw err
  } finally {
    tar.stdin.end()
  }
  const code = await tarDone
  if (result.exitCode !== 0) {
    throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `VM ${id} could not archive its tree: ${guestErr.trim() || `exit ${result.exitCode}`}`, { reason: 'snapshot', id })
  }
  if (code !== 0) throw createError(ErrorCodes.BACKEND_UNAVAILABLE, `unpacking VM ${id}'s tree failed: ${tarErr.trim() || `tar exited ${code}`}`, { reason: 'snapshot', id })
}
