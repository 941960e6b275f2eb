/** The shapes the page reads off the wire (docs/protocol.md): only the fields it shows. */

export interface SandboxView {
  id: string
  state: string
  backend: string
  labels: Record<string, string>
  nodeId: string
  createdAt: number
  expiresAt: number
  reason?: string
  message?: string
}

export interface NodeFigures {
  id: string
  alive: boolean
  lastSeenMs: number
  shard: number
  capacity: { cpus: number, memoryMiB: number, cpuOvercommit: number, memoryOvercommit: number, maxSandboxes: Record<string, number>, backends: string[] }
  usage: { cpus: number, memoryMiB: number, sandboxes: Record<string, number> }
  layersCached: number
}

export interface CreationPoint { t: number, created: number, failed: number, p50?: number, p90?: number, p99?: number }

export interface ClusterStats {
  at: number
  nodes: NodeFigures[]
  nodesOmitted: number
  layers: { distinct: number, copies: number, top: Array<{ digest: string, nodes: number }> }
  creations: CreationPoint[]
}

export interface RecordedBytes { bytes: number, sha256: string, data?: Uint8Array, blob?: string, head?: Uint8Array, tail?: Uint8Array }

export interface Step {
  seq: number
  at: number
  kind: string
  execId?: string
  argv?: string[]
  cwd?: string
  endedAt?: number
  exitCode?: number
  reason?: string
  durationMs?: number
  stdout?: RecordedBytes
  stderr?: RecordedBytes
  stdin?: RecordedBytes
  /** Paths are strings, or bytes for a name that is not UTF-8. */
  path?: string | Uint8Array
  from?: string | Uint8Array
  to?: string | Uint8Array
  target?: string | Uint8Array
  content?: RecordedBytes
  snapshot?: string
  host?: string
  port?: number
  allowed?: boolean
}

export interface TrajectoryHeader { sandboxId: string, node: string, createdAt: number, spec: Record<string, unknown>, layers: string[], snapshot?: string }

export interface TrajectoryPage { header?: TrajectoryHeader, steps: Step[], nextSeq: number, complete: boolean }
