/**
 * Where each cgroup controller lives on this host. cgroup v2 puts every controller in one
 * unified tree; v1 gives each its own hierarchy; hybrid hosts (like the development machine)
 * mix both. We look per controller: a v1 hierarchy that has it wins (a controller bound to v1
 * is not available in v2), else the v2 tree if it offers it.
 */
import { readFileSync } from 'node:fs'

export type Controller = 'memory' | 'cpu' | 'pids'
export const CONTROLLERS: readonly Controller[] = ['memory', 'cpu', 'pids']

export interface ControllerPlace {
  version: 1 | 2
  /** The hierarchy's mount point. */
  mount: string
}

export type CgroupLayout = Partial<Record<Controller, ControllerPlace>>

/** Reads /proc/self/mountinfo (or the given text) into the layout. */
export function detectLayout (mountinfo = readFileSync('/proc/self/mountinfo', 'utf8')): CgroupLayout {
  const layout: CgroupLayout = {}
  let unified: string | undefined
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ')
    if (left === undefined || right === undefined) continue
    const mountPoint = left.split(' ')[4]
    const [fstype, , superOptions = ''] = right.split(' ')
    if (mountPoint === undefined) continue
    if (fstype === 'cgroup2') unified = mountPoint
    if (fstype !== 'cgroup') continue
    for (const option of superOptions.split(',')) {
      if ((CONTROLLERS as readonly string[]).includes(option)) layout[option as Controller] = { version: 1, mount: mountPoint }
    }
  }
  if (unified !== undefined) {
    let offered: string[] = []
    try { offered = readFileSync(`${unified}/cgroup.controllers`, 'utf8').trim().split(/\s+/) } catch { /* no controllers */ }
    for (const c of CONTROLLERS) if (layout[c] === undefined && offered.includes(c)) layout[c] = { version: 2, mount: unified }
  }
  return layout
}
