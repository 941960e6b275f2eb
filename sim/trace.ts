/**
 * Trace replay: a JSONL file of create/kill events drives the simulation instead of the generated
 * workload, so users plan with their own traffic. One event a line:
 *
 *   {"t": 0, "op": "create", "id": "a", "spec": {"backend": "container", "limits": {"cpus": 1, "memoryMiB": 512}, "image": {"base": "py312"}}}
 *   {"t": 60000, "op": "kill", "id": "a"}
 *
 * `t` is ms from the start, non-decreasing. A create may also give `"cpuUse"` (CPUs actually used,
 * default the whole request) and `image.workspace` / `image.tools` (extra layers). A traced
 * sandbox runs until its kill (or the end of the run). Parsing is strict: an unknown key, a bad
 * value, time going backwards, a duplicate live id or a kill of an unknown id is refused with
 * WARREN_ERR_INVALID_ARGUMENT naming the line.
 */
import { readFileSync } from 'node:fs'
import { createError, ErrorCodes } from '../src/errors.js'
import type { BackendKind } from '../src/backends/types.js'
import type { SandboxSpec } from './workload.js'

/** Longest line accepted (bytes of UTF-16 text, after stripping the newline). */
export const MAX_TRACE_LINE = 64 * 1024
const MAX_ID = 256
const BACKENDS: readonly BackendKind[] = ['function', 'container', 'microvm', 'fullvm']

export type TraceEvent =
  | { t: number, op: 'create', id: string, spec: SandboxSpec }
  | { t: number, op: 'kill', id: string }

/** What the engine reads arrivals from when it is given one (see SimulationConfig.arrivals). */
export interface ArrivalSource {
  /** Time (ms) of the next event, Infinity when there is none. */
  peek (): number
  /** Takes the next event. */
  take (): TraceEvent
}

export class Trace implements ArrivalSource {
  private i = 0
  constructor (readonly events: readonly TraceEvent[]) {}
  peek (): number { return this.i < this.events.length ? this.events[this.i]!.t : Infinity }
  take (): TraceEvent { return this.events[this.i++]! }
  /** A fresh cursor over the same events. */
  reset (): Trace { return new Trace(this.events) }
  get lastMs (): number { return this.events.length === 0 ? 0 : this.events[this.events.length - 1]!.t }
  get creates (): number { let n = 0; for (const e of this.events) if (e.op === 'create') n++; return n }
  get kills (): number { return this.events.length - this.creates }
}

function bad (line: number, why: string): never {
  throw createError(ErrorCodes.INVALID_ARGUMENT, `trace line ${line}: ${why}`, { line })
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

function onlyKeys (o: Record<string, unknown>, allowed: readonly string[], line: number, where: string): void {
  for (const k of Object.keys(o)) if (!allowed.includes(k)) bad(line, `unknown key ${JSON.stringify(k)}${where}`)
}

function positive (v: unknown, line: number, name: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) bad(line, `${name} must be a positive number`)
  return v
}

function layerName (v: unknown, line: number, name: string): string {
  if (typeof v !== 'string' || v.length === 0 || v.length > MAX_ID) bad(line, `${name} must be a non-empty string of at most ${MAX_ID} characters`)
  return v
}

/** Parses a JSONL trace (the file's text). */
export function parseTrace (text: string): Trace {
  const events: TraceEvent[] = []
  const live = new Set<string>()
  let last = 0
  let start = 0
  let line = 0
  while (start <= text.length) {
    let nl = text.indexOf('\n', start)
    if (nl < 0) nl = text.length
    line++
    if (nl - start > MAX_TRACE_LINE) bad(line, `longer than ${MAX_TRACE_LINE} characters`)
    let raw = text.slice(start, nl)
    start = nl + 1
    if (raw.endsWith('\r')) raw = raw.slice(0, -1)
    if (raw.trim() === '') continue
    let v: unknown
    try { v = JSON.parse(raw) } catch { bad(line, 'not valid JSON') }
    if (!isObject(v)) bad(line, 'not a JSON object')
    const t = v.t
    if (typeof t !== 'number' || !Number.isFinite(t) || t < 0) bad(line, 't must be a non-negative number of ms')
    if (t < last) bad(line, `t ${t} is before the previous event's ${last}`)
    last = t
    const id = v.id
    if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID) bad(line, `id must be a non-empty string of at most ${MAX_ID} characters`)
    if (v.op === 'kill') {
      onlyKeys(v, ['t', 'op', 'id'], line, '')
      if (!live.delete(id)) bad(line, `kill of ${JSON.stringify(id)}, which is not running`)
      events.push({ t, op: 'kill', id })
    } else if (v.op === 'create') {
      onlyKeys(v, ['t', 'op', 'id', 'spec'], line, '')
      if (live.has(id)) bad(line, `create of ${JSON.stringify(id)}, which is already running`)
      const s = v.spec
      if (!isObject(s)) bad(line, 'spec must be an object')
      onlyKeys(s, ['backend', 'limits', 'image', 'cpuUse'], line, ' in spec')
      if (typeof s.backend !== 'string' || !BACKENDS.includes(s.backend as BackendKind)) bad(line, `spec.backend must be one of ${BACKENDS.join(', ')}`)
      const limits = s.limits
      if (!isObject(limits)) bad(line, 'spec.limits must be an object')
      onlyKeys(limits, ['cpus', 'memoryMiB'], line, ' in spec.limits')
      const cpus = positive(limits.cpus, line, 'spec.limits.cpus')
      const memoryMiB = positive(limits.memoryMiB, line, 'spec.limits.memoryMiB')
      let cpuUse = cpus
      if (s.cpuUse !== undefined) {
        if (typeof s.cpuUse !== 'number' || !Number.isFinite(s.cpuUse) || s.cpuUse < 0 || s.cpuUse > cpus) bad(line, 'spec.cpuUse must be a number between 0 and spec.limits.cpus')
        cpuUse = s.cpuUse
      }
      const image = s.image
      if (!isObject(image)) bad(line, 'spec.image must be an object')
      onlyKeys(image, ['base', 'workspace', 'tools'], line, ' in spec.image')
      const layers = [layerName(image.base, line, 'spec.image.base')]
      if (image.workspace !== undefined) layers.push(layerName(image.workspace, line, 'spec.image.workspace'))
      if (image.tools !== undefined) layers.push(layerName(image.tools, line, 'spec.image.tools'))
      live.add(id)
      events.push({ t, op: 'create', id, spec: { backend: s.backend as BackendKind, cpus, memoryMiB, cpuUse, lifetimeMs: Infinity, layers, coldReadBytes: 0 } })
    } else {
      bad(line, 'op must be "create" or "kill"')
    }
  }
  return new Trace(events)
}

/** Reads and parses a trace file. */
export function readTrace (path: string): Trace {
  let text: string
  try { text = readFileSync(path, 'utf8') } catch (err) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `cannot read the trace ${path}: ${err instanceof Error ? err.message : String(err)}`)
  }
  return parseTrace(text)
}
