/**
 * Every tunable of the cgroups module, in one object. Values come from the kernel's cgroup
 * documentation where it fixes them (CFS period, minimum quota), the rest from what a sandbox
 * platform needs (how long a kill or a removal may take before it is reported).
 */
export const CgroupDefaults = {
  /** The group every sandbox group lives under, in each hierarchy (a path relative to the mount). */
  parent: 'warren',
  /** CFS period in microseconds; the kernel's default (`cpu.max` "max 100000"). */
  cpuPeriodUs: 100_000,
  /** The kernel refuses CFS quotas under 1 ms; smaller requests are raised to it. */
  minCpuQuotaUs: 1_000,
  /**
   * v2 `memory.oom.group`. Off: an OOM kills the command that ran out (the largest process), and
   * the sandbox — its agent and the rollout's background processes — lives on, as on v1, where
   * only the victim dies anyway. On would end every process of the group at once.
   */
  oomGroup: false,
  /** `killAll` gives up (WARREN_ERR_TIMEOUT) when the group is not empty by then. */
  killTimeoutMs: 5_000,
  /** `remove` retries rmdir on EBUSY (a group empties a moment after its last task exits) this long. */
  removeTimeoutMs: 5_000,
  /** How long one freeze may take before the kill goes ahead regardless (tasks in D state delay it). */
  freezeWaitMs: 1_000,
  /**
   * `freeze` (pause, snapshot) gives up (WARREN_ERR_TIMEOUT, the group thawed again) when the
   * group is not frozen by then: a task stuck in uninterruptible sleep cannot stop.
   */
  freezeTimeoutMs: 5_000,
  /** Polling interval while waiting for a group to freeze or empty. */
  pollMs: 5,
  mountinfoPath: '/proc/self/mountinfo',
  procCgroupsPath: '/proc/cgroups'
} as const
