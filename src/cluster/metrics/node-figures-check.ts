/**
 * Checks the figures a node's heartbeat carries before the control plane keeps them: a node is
 * less trusted than the control plane, so only the fixed shape of `NodeFigures` is accepted —
 * exactly its keys, every value a finite number in [0, 2^53], the bucket list its exact length.
 * Anything else is refused whole, naming the field, and nothing of it is kept.
 */
import { createError, ErrorCodes } from '../../errors.js'
import { BACKEND_LABELS, DEAD_LETTER_REASONS, MetricsDefaults, NODE_ACTOR_KINDS } from './defaults.js'
import type { NodeFigures } from './node-figures.js'

const LAYER_CACHE_KEYS = ['hitBytes', 'missBytes', 'fetchedBytes', 'fetchFailures', 'cachedBytes', 'layers'] as const
const MAILBOX_KEYS = ['actors', 'queued', 'max'] as const

function refuse (field: string, why: string): never {
  throw createError(ErrorCodes.INVALID_ARGUMENT, `heartbeat ${field} ${why}`, { field })
}

function figure (v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > MetricsDefaults.maxFigure) refuse(field, 'must be a finite number in [0, 2^53]')
  return v
}

/** A plain object with exactly `keys`, each a figure. */
function record<K extends string> (v: unknown, keys: readonly K[], field: string): Record<K, number> {
  const o = object(v, keys, field)
  return Object.fromEntries(keys.map((k) => [k, figure(o[k], `${field}.${k}`)])) as Record<K, number>
}

function object (v: unknown, keys: readonly string[], field: string): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v) || Object.getPrototypeOf(v) !== Object.prototype) refuse(field, 'must be an object')
  const got = Object.keys(v)
  if (got.length !== keys.length || !got.every((k) => keys.includes(k))) refuse(field, `must have exactly the keys ${keys.join(', ')}`)
  return v as Record<string, unknown>
}

/**
 * The figures as the control plane keeps them (a fresh copy: nothing of the node's object).
 * @throws WARREN_ERR_INVALID_ARGUMENT naming the field (`figures.execSeconds.counts`…) when the shape or a value is wrong
 */
export function parseNodeFigures (v: unknown): NodeFigures {
  const o = object(v, ['execs', 'execSeconds', 'outputBytes', 'sandboxes', 'layerCache', 'deadLetters', 'mailboxes', 'restarts'], 'figures')
  const ex = object(o.execSeconds, ['counts', 'sum'], 'figures.execSeconds')
  const n = MetricsDefaults.execBuckets.length + 1
  if (!Array.isArray(ex.counts) || ex.counts.length !== n) refuse('figures.execSeconds.counts', `must be a list of ${n} numbers`)
  const boxes = object(o.mailboxes, NODE_ACTOR_KINDS, 'figures.mailboxes')
  return {
    execs: figure(o.execs, 'figures.execs'),
    execSeconds: { counts: (ex.counts as unknown[]).map((c, i) => figure(c, `figures.execSeconds.counts.${i}`)), sum: figure(ex.sum, 'figures.execSeconds.sum') },
    outputBytes: figure(o.outputBytes, 'figures.outputBytes'),
    sandboxes: record(o.sandboxes, BACKEND_LABELS, 'figures.sandboxes'),
    layerCache: record(o.layerCache, LAYER_CACHE_KEYS, 'figures.layerCache'),
    deadLetters: record(o.deadLetters, DEAD_LETTER_REASONS, 'figures.deadLetters'),
    mailboxes: Object.fromEntries(NODE_ACTOR_KINDS.map((k) => [k, record(boxes[k], MAILBOX_KEYS, `figures.mailboxes.${k}`)])) as NodeFigures['mailboxes'],
    restarts: figure(o.restarts, 'figures.restarts')
  }
}
