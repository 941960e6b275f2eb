/**
 * Reading what a group uses and what happened to it. Each figure comes from the hierarchy its
 * controller lives in, in that version's file: v2 memory.current / v1 memory.usage_in_bytes …
 */
import { join } from 'node:path'
import { keyValues, readNumber, readOptional } from './fsio.js'
import type { CgroupEvents, CgroupUsage, LayoutKey } from './types.js'

/** The group's directory and version for a layout key, as the handle knows them. */
export type DirLookup = (key: LayoutKey) => { dir: string, version: 1 | 2 } | undefined

/** Current use of memory, pids and CPU time. */
export async function readUsage (lookup: DirLookup): Promise<CgroupUsage> {
  const memory = lookup('memory')
  const pids = lookup('pids')
  let memoryBytes: number | undefined
  let memoryPeakBytes: number | undefined
  if (memory !== undefined) {
    memoryBytes = await readNumber(join(memory.dir, memory.version === 2 ? 'memory.current' : 'memory.usage_in_bytes'))
    memoryPeakBytes = await readNumber(join(memory.dir, memory.version === 2 ? 'memory.peak' : 'memory.max_usage_in_bytes'))
  }
  return {
    memoryBytes,
    memoryPeakBytes,
    pids: pids !== undefined ? await readNumber(join(pids.dir, 'pids.current')) : undefined,
    cpuUsec: await readCpuUsec(lookup)
  }
}

// v2 keeps cpu.stat usage_usec in every group (no controller needed); v1 has it in cpuacct, in ns.
async function readCpuUsec (lookup: DirLookup): Promise<number | undefined> {
  const v2 = lookup('unified') ?? (lookup('cpu')?.version === 2 ? lookup('cpu') : undefined)
  if (v2 !== undefined) {
    const usage = keyValues(await readOptional(join(v2.dir, 'cpu.stat'))).get('usage_usec')
    if (usage !== undefined) return usage
  }
  const acct = lookup('cpuacct')
  if (acct === undefined) return undefined
  const ns = await readNumber(join(acct.dir, 'cpuacct.usage'))
  return ns !== undefined ? Math.floor(ns / 1000) : undefined
}

/**
 * OOM kills and limit hits. OOM kills: v2 memory.events `oom_kill`; v1 memory.oom_control
 * `oom_kill` (kernel 4.13+); before that only memory.failcnt, which counts limit hits, not
 * kills, and is reported as an approximation (`oomSource`).
 */
export async function readEvents (lookup: DirLookup): Promise<CgroupEvents> {
  let oomKills = 0
  let oomSource: CgroupEvents['oomSource'] = 'none'
  let memoryLimitHits = 0
  const memory = lookup('memory')
  if (memory?.version === 2) {
    const events = keyValues(await readOptional(join(memory.dir, 'memory.events')))
    oomKills = events.get('oom_kill') ?? 0
    memoryLimitHits = events.get('max') ?? 0
    oomSource = 'memory.events'
  } else if (memory?.version === 1) {
    // With memsw set to the same limit, the memory+swap counter is charged first and fails first.
    const failcnt = Math.max(
      await readNumber(join(memory.dir, 'memory.failcnt')) ?? 0,
      await readNumber(join(memory.dir, 'memory.memsw.failcnt')) ?? 0
    )
    memoryLimitHits = failcnt
    const kills = keyValues(await readOptional(join(memory.dir, 'memory.oom_control'))).get('oom_kill')
    if (kills !== undefined) {
      oomKills = kills
      oomSource = 'memory.oom_control'
    } else {
      oomKills = failcnt > 0 ? 1 : 0
      oomSource = 'memory.failcnt'
    }
  }
  const pids = lookup('pids')
  const pidsLimitHits = pids !== undefined ? keyValues(await readOptional(join(pids.dir, 'pids.events'))).get('max') ?? 0 : 0
  return { oomKills, oomSource, memoryLimitHits, pidsLimitHits }
}
