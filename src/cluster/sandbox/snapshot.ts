/**
 * A sandbox's snapshot, as its node makes it: the backend cuts the sandbox's file system into a
 * read-only layer (in the node's layer store, so sandboxes here can stack it at once), then the
 * layer goes to the control plane's blob store as a `snapshot` blob. The answer comes after the
 * push, so a snapshot id the control plane hands out always names a layer every node can fetch.
 */
import type { Backend, SandboxHandle, SavedMachine, SnapshotLayer } from '../../backends/types.js'
import type { BlobKind } from '../../images/index.js'
import { createError, ErrorCodes } from '../../errors.js'

/** What a `snapshot` message answers. */
export interface SnapshotResult {
  /** `sha256:<hex>` of the new layer, in the blob store now. */
  layer: string
  bytes: number
  /** True when the layer holds the whole file system (it stands alone), not only what the sandbox wrote. */
  flattened: boolean
  /** A memory snapshot: `layer` is then the VM's saved state (not a layer), restored by a guest of this shape. */
  memory?: SavedMachine
}

export interface SnapshotDeps {
  id: string
  backend: Backend
  handle: SandboxHandle
  pushBlob: ((file: string, kind: BlobKind) => Promise<{ digest: string, bytes: number }>) | undefined
  /** Runs the backend's cut in turn with pauses and resumes (PauseControl.serial). */
  serial: <T>(work: () => Promise<T>) => Promise<T>
}

/**
 * Cuts and pushes a snapshot of a ready or paused sandbox; with `memory`, its whole state.
 * @throws WARREN_ERR_UNSUPPORTED naming `backend` when the backend cannot snapshot, or the node cannot push; naming `memory` when it cannot save memory
 */
export async function snapshotSandbox (d: SnapshotDeps, flatten: boolean, memory = false): Promise<SnapshotResult> {
  const { backend } = d
  if (backend.snapshots !== true || backend.snapshot === undefined) {
    throw createError(ErrorCodes.UNSUPPORTED, `the ${backend.kind} backend cannot snapshot sandboxes`, { field: 'backend', backend: backend.kind })
  }
  if (d.pushBlob === undefined) {
    throw createError(ErrorCodes.UNSUPPORTED, `the node of sandbox ${d.id} has no blob store to push snapshots to`, { field: 'backend', backend: backend.kind })
  }
  if (memory && backend.memorySnapshots !== true) {
    throw createError(ErrorCodes.UNSUPPORTED, `the ${backend.kind} backend cannot snapshot memory (microvm can)`, { field: 'memory', backend: backend.kind })
  }
  const layer: SnapshotLayer = await d.serial(() => backend.snapshot!(d.handle, memory ? { memory } : { flatten }))
  const pushed = await d.pushBlob(layer.path, 'snapshot')
  if (pushed.digest !== layer.digest) {
    throw createError(ErrorCodes.INTERNAL, `snapshot layer of sandbox ${d.id} was pushed as ${pushed.digest}, not ${layer.digest}`)
  }
  if (layer.memory !== undefined) return { layer: pushed.digest, bytes: pushed.bytes, flattened: false, memory: layer.memory }
  return { layer: pushed.digest, bytes: pushed.bytes, flattened: flatten }
}
