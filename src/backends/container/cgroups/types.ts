/**
 * The shapes the cgroups module speaks in: where each controller lives (the layout), the limits
 * of a sandbox, and what a sandbox group reports.
 */

/** Controllers warren uses. `cpuacct` exists in v1 only (in v2 every group has `cpu.stat`). */
export type Controller = 'memory' | 'cpu' | 'cpuacct' | 'pids' | 'freezer'

/** A key of the layout: a controller, or `unified`, the v2 hierarchy that tracks and kills processes. */
export type LayoutKey = Controller | 'unified'

/** A controller mounted in a v1 hierarchy of its own (or shared with `controllers`, e.g. cpu,cpuacct). */
export interface V1Placement {
  readonly version: 1
  /** Where the hierarchy is mounted; groups are directories below it. */
  readonly mount: string
  /** The hierarchy path the mount shows (not `/` inside some containers). */
  readonly root: string
  /** Every controller bound to this hierarchy. */
  readonly controllers: readonly string[]
}

/** A controller (or the process tracking) in the v2 unified hierarchy. */
export interface V2Placement {
  readonly version: 2
  readonly mount: string
  readonly root: string
}

export type Placement = V1Placement | V2Placement

/**
 * Where each controller lives on this host; a missing key means not available. Every value is a
 * placement, so `Object.values(layout)` lists every hierarchy a sandbox group may occupy.
 */
export type CgroupLayout = { readonly [C in Controller]?: Placement } & { readonly unified?: V2Placement }

/** Limits of one sandbox. 0 or absent means unlimited. */
export interface SandboxLimits {
  /** Memory in MiB. Swap is never allowed on top of it. */
  memoryMiB?: number
  /** CPU time as a fraction of cores (0.5 = half a core, 2 = two cores). */
  cpus?: number
  /** Processes and threads at most. */
  pids?: number
}

/** What a group is using now; undefined where the controller (or its file) is not there. */
export interface CgroupUsage {
  memoryBytes: number | undefined
  /** Highest memory use seen (v2 memory.peak, v1 memory.max_usage_in_bytes). */
  memoryPeakBytes: number | undefined
  pids: number | undefined
  /** CPU time consumed by the group, ever, in microseconds. */
  cpuUsec: number | undefined
}

/** Where the OOM-kill count came from; `memory.failcnt` is an approximation (kernels before 4.13). */
export type OomSource = 'memory.events' | 'memory.oom_control' | 'memory.failcnt' | 'none'

/** Counters of limit events since the group was made. */
export interface CgroupEvents {
  /** Processes the OOM killer killed inside the group. */
  oomKills: number
  oomSource: OomSource
  /** Times memory use hit the limit (v2 memory.events max, v1 memory.failcnt or memory.memsw.failcnt). */
  memoryLimitHits: number
  /** Forks refused by pids.max (pids.events max). */
  pidsLimitHits: number
}

/** Options shared by the group functions. */
export interface CgroupOptions {
  /** The parent group, relative to each hierarchy's mount; default `CgroupDefaults.parent`. */
  parent?: string
  /** The layout to use; default the host's, detected once. */
  layout?: CgroupLayout
}

export interface CreateCgroupOptions extends CgroupOptions {
  /** v2 memory.oom.group; default `CgroupDefaults.oomGroup`. */
  oomGroup?: boolean
}

export interface KillOptions {
  timeoutMs?: number
  /**
   * `auto` writes v2 `cgroup.kill` when the kernel has it, then falls back to signals for anything
   * left; `signals` always freezes the group and SIGKILLs each process (the path for old kernels).
   */
  via?: 'auto' | 'signals'
}

/** One sandbox's group, present in every hierarchy that one of its controllers lives in. */
export interface SandboxCgroupHandle {
  readonly name: string
  readonly parent: string
  /** One directory per hierarchy (what the launcher joins). A copy: changing it changes nothing. */
  readonly dirs: string[]
  /** The `cgroup.procs` file of each directory; a process joins the group by writing its pid into all. */
  readonly procsFiles: string[]
  /** The directory whose files control `key`, or undefined when the group does not use it. */
  dirOf (key: LayoutKey): string | undefined
  /** Moves process `pid` into the group in every hierarchy. */
  addProcess (pid: number): Promise<void>
  /** Every process in the group and the groups below it, in any hierarchy, sorted. */
  pids (): Promise<number[]>
  events (): Promise<CgroupEvents>
  /** OOM kills inside the group so far. */
  oomKills (): Promise<number>
  /** True once the OOM killer has killed a process of the group. */
  oomKilled (): Promise<boolean>
  usage (): Promise<CgroupUsage>
  /** Kills every process of the group and waits until it is empty. Idempotent. */
  killAll (opts?: KillOptions): Promise<void>
  /**
   * Stops every process of the group (and its subgroups) and waits until all have stopped.
   * Idempotent. A kill still ends a frozen group (`killAll`, `remove` thaw after the signal).
   * @throws WARREN_ERR_UNSUPPORTED when the host has no freezer; WARREN_ERR_NOT_FOUND when the
   *   group does not exist; WARREN_ERR_TIMEOUT (thawed again) when it does not freeze in time
   */
  freeze (opts?: { timeoutMs?: number }): Promise<void>
  /** Lets the processes of a frozen group run on. Idempotent; a group that is gone is fine. */
  thaw (): Promise<void>
  /** True while the group is frozen or freezing (false without a freezer, or when it is gone). */
  frozen (): Promise<boolean>
  /** Kills what is left and removes the group from every hierarchy. Idempotent. */
  remove (opts?: { timeoutMs?: number }): Promise<void>
}
