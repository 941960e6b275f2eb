/**
 * The trajectories of one node's sandboxes: their logs (`<node dataDir>/trajectories`, or memory
 * on a node without one), a recorder per sandbox, and the shipper that takes the logs to the
 * control plane. Owned by the node process, so it outlives its agent actor; at start it reads
 * back the logs a previous agent left: those of sandboxes the agent re-adopts go on where they
 * were, the rest are ended, and everything the control plane has not acknowledged goes again.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { BackendKind } from '../../backends/types.js'
import { errorField, type Logger } from '../../log/index.js'
import { placementRequestOf, type SandboxSpec } from '../spec.js'
import { ImageRefDefaults } from '../spec-image.js'
import { NodeLog, NodeLogDefaults, scanLog, type ScannedLog } from './node-log.js'
import { RecordBudget, type PushBlob } from './recorded-bytes.js'
import { SandboxRecorder } from './recorder.js'
import { ShipDefaults, TrajectoryShipper, type ShipSend } from './shipper.js'
import { TrajectoryDefaults, type Step, type TrajectoryHeader, type TrajectoryLimits } from './types.js'

export const NodeTrajectoryDefaults = {
  /** How long a sandbox that ends waits for its commands' steps to end, then for the control plane to acknowledge all of it. */
  closeWaitMs: 2000,
  flushWaitMs: 2000
}

export interface NodeTrajectoriesOptions {
  nodeId: string
  /** Where the logs go (`<dataDir>/trajectories`); undefined keeps them in memory. */
  dir?: string
  /** Puts large recorded bytes into the control plane's blob store; without it they are kept as head and tail. */
  pushBlob?: PushBlob
  /** Delivers batches to `cp/trajectories` (set later with `setSend` when the link comes after). */
  send?: ShipSend
  limits?: Partial<TrajectoryLimits>
  ship?: Partial<typeof ShipDefaults>
  /** Where a log that cannot be read is reported (none: silent). */
  log?: Logger
}

/** A sandbox whose trajectory starts (or goes on) on this node. */
export interface OpenTrajectory {
  sandboxId: string
  tenant: string
  spec: SandboxSpec
  createdAt: number
  /** Made again under its id (resume, restore): its steps go on from here and no header is written. */
  nextSeq?: number
  /**
   * The sandbox outlives the node agent (its backend re-adopts it): its log is a file, so a
   * restarted agent goes on with it. Other logs are kept in memory: their sandboxes end with the
   * agent, and creating a file for each would cost a fast creation rate more than the log is worth.
   */
  durable?: boolean
  /**
   * Exec ids of commands that outlived the agent with the sandbox (`SandboxRecorder.resumeExec`);
   * `unfinished`: any command not ended may have (a sandbox adopted paused: its are known at resume).
   */
  resumable?: string[] | 'unfinished'
}

/** A sandbox's journal paths, by step seq: `<dir>/<sandboxId>.<seq>.out`. */
function journalPathOf (dir: string, sandboxId: string): (stepSeq: number) => string {
  return (stepSeq) => join(dir, `${sandboxId}.${stepSeq}.out`)
}

/** The layers a sandbox stands on, bottom first, as its header records them. */
export function headerLayers (spec: SandboxSpec): string[] {
  const layers = placementRequestOf(spec).layers
  const layered: BackendKind[] = ['container', 'microvm', 'fullvm']
  return layers.length === 0 && layered.includes(spec.backend) ? [ImageRefDefaults.builtinBase] : layers
}

export class NodeTrajectories {
  readonly limits: TrajectoryLimits
  readonly shipper: TrajectoryShipper
  private readonly logs = new Map<string, NodeLog>()
  /** Logs a previous agent left, until a re-adopted sandbox claims its own. */
  private readonly found = new Map<string, ScannedLog>()
  private readonly spillDir: string
  /** Resumable commands' output journals (output-journal.ts), on a node with a data dir. */
  private readonly journalDir: string | undefined
  private spilled = 0
  /** What the logs without a file hold together. */
  private readonly memory = new RecordBudget(NodeLogDefaults.maxMemoryBytes)

  constructor (private readonly o: NodeTrajectoriesOptions) {
    this.limits = { ...TrajectoryDefaults, ...o.limits }
    this.shipper = new TrajectoryShipper(o.nodeId, this.logs, o.send, { ...ShipDefaults, ...o.ship })
    if (o.dir !== undefined) {
      mkdirSync(o.dir, { recursive: true, mode: 0o700 })
      this.spillDir = join(o.dir, 'spill')
      // Bytes a previous agent was recording when it died: no step will ever carry them.
      rmSync(this.spillDir, { recursive: true, force: true })
      mkdirSync(this.spillDir, { mode: 0o700 })
      // Kept across restarts: a re-adopted command's step takes up its journal.
      this.journalDir = join(o.dir, 'journals')
      mkdirSync(this.journalDir, { recursive: true, mode: 0o700 })
      this.scan(o.dir)
    } else {
      this.spillDir = mkdtempSync(join(tmpdir(), `warren-trajectory-${o.nodeId}-`))
      this.journalDir = undefined
    }
  }

  /** Sets how batches reach the control plane. */
  setSend (send: ShipSend): void { this.shipper.setSend(send) }

  /** Starts (or goes on with) a sandbox's trajectory: its recorder. */
  open (t: OpenTrajectory): SandboxRecorder {
    const found = this.found.get(t.sandboxId)
    this.found.delete(t.sandboxId)
    let log = this.logs.get(t.sandboxId)
    let nextSeq = 0
    let unfinished: Iterable<Step> = []
    let recorded = 0
    if (found !== undefined && log !== undefined) {
      // Re-adopted after a restart of the agent: on from where its log got to.
      nextSeq = found.nextSeq
      unfinished = found.open.values()
      recorded = found.recordedBytes
      if (log.ended) log.append({ t: 'continue', at: Date.now(), nextSeq })
    } else if (t.nextSeq !== undefined) {
      nextSeq = t.nextSeq
      if (log === undefined) { log = this.newLog(t); this.logs.set(t.sandboxId, log) }
      log.append({ t: 'continue', at: Date.now(), nextSeq })
    } else {
      log?.remove()
      log = this.newLog(t)
      this.logs.set(t.sandboxId, log)
      const header: TrajectoryHeader = {
        sandboxId: t.sandboxId, tenant: t.tenant, node: this.o.nodeId, createdAt: t.createdAt, spec: t.spec, layers: headerLayers(t.spec),
        ...(typeof (t.spec as { snapshot?: unknown }).snapshot === 'string' ? { snapshot: (t.spec as { snapshot?: string }).snapshot! } : {})
      }
      log.append({ t: 'header', header })
    }
    this.shipper.poke(log)
    return new SandboxRecorder({
      log, shipper: this.shipper, budget: new RecordBudget(this.limits.maxRecordedBytes, recorded), push: this.o.pushBlob,
      spillPath: () => join(this.spillDir, `${t.sandboxId}-${++this.spilled}`), limits: this.limits,
      ...(this.journalDir !== undefined && t.durable === true ? { journalPath: journalPathOf(this.journalDir, t.sandboxId) } : {}),
      nextSeq, unfinished, ...(t.resumable !== undefined ? { resumable: t.resumable === 'unfinished' ? t.resumable : new Set(t.resumable) } : {}), closeWaitMs: NodeTrajectoryDefaults.closeWaitMs, flushWaitMs: NodeTrajectoryDefaults.flushWaitMs
    })
  }

  /**
   * Ends the logs a previous agent left that no re-adopted sandbox claimed: their sandboxes are
   * gone. Their unfinished steps become final (a command as `lost`), and the end record goes.
   */
  endUnclaimed (): void {
    for (const [id, found] of this.found) {
      const log = this.logs.get(id)
      if (log !== undefined && !log.ended) {
        for (const step of found.open.values()) log.append({ t: 'step', final: true, step: step.kind === 'exec' ? { ...step, endedAt: Date.now(), reason: 'lost' } : step })
        log.append({ t: 'end', at: Date.now(), nextSeq: found.nextSeq })
      }
      if (log !== undefined) this.shipper.poke(log)
    }
    this.found.clear()
    // Journals of sandboxes gone with the old agent, or whose steps ended as it died.
    if (this.journalDir !== undefined) {
      for (const name of readdirSync(this.journalDir)) {
        const id = /^(.+)\.\d+\.out$/.exec(name)?.[1]
        if (id === undefined || this.logs.get(id)?.ended !== false) rmSync(join(this.journalDir, name), { force: true })
      }
    }
  }

  /** The control link joined (again): what is not acknowledged goes now. */
  linkUp (): void { this.shipper.linkUp() }
  /** The control link is down: nothing waits for acknowledgements meanwhile. */
  linkDown (): void { this.shipper.linkDown() }

  /** Stops shipping (the node is closing); what is on disk goes after the next start. */
  close (): void {
    this.shipper.close()
    if (this.o.dir === undefined) rmSync(this.spillDir, { recursive: true, force: true })
  }

  private newLog (t: OpenTrajectory): NodeLog {
    return new NodeLog(t.sandboxId, t.durable === true ? this.o.dir : undefined, undefined, this.memory)
  }

  private scan (dir: string): void {
    for (const name of readdirSync(dir)) {
      const m = /^(.+)\.log$/.exec(name)
      if (m === null) continue
      const id = m[1]!
      let found: ScannedLog
      try {
        found = scanLog(dir, id)
      } catch (err) {
        this.o.log?.warn({ node: this.o.nodeId, file: name, err: errorField(err) }, 'a trajectory log cannot be read; it is left as it is')
        continue
      }
      const log = new NodeLog(id, dir, found)
      if (log.ended && log.settled) { log.remove(); continue }
      this.logs.set(id, log)
      this.found.set(id, found)
    }
  }
}
