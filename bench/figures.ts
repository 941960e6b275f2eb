/**
 * The small pieces every benchmark computes its figures with: the median, rounding for the JSON
 * line, a pause, and what the kernel says of a process's and the host's memory.
 */
import { fstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { GUEST_RAM_LINK } from '../src/backends/microvm/index.js'

/** The median (the upper one of an even count); NaN for none. */
export const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN

/** `x` to `d` decimals, as a number. */
export const round = (x: number, d = 1): number => Number(x.toFixed(d))

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** A process's proportional and resident set sizes in KiB (smaps_rollup); zeros once it is gone. */
export function processMemoryKiB (pid: number): { pss: number, rss: number } {
  try {
    const t = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8')
    const kib = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(t)?.[1] ?? 0)
    return { pss: kib('Pss'), rss: kib('Rss') }
  } catch {
    return { pss: 0, rss: 0 }
  }
}

/** The host's MemAvailable in KiB. */
export const memAvailableKiB = (): number => Number(/^MemAvailable:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1] ?? 0)

/** KiB resident in the saved guests' RAM this process holds (templates: each a memfd, backends/microvm/guest-ram.ts). */
export function heldGuestRamKiB (): number {
  let kib = 0
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(GUEST_RAM_LINK)) kib += fstatSync(Number(fd)).blocks / 2
    } catch {}
  }
  return kib
}
