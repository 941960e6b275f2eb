/**
 * The flags that describe a sandbox to create, shared by `warren create` and `warren run`, and
 * the create spec they make.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { CreateSpec } from '../sdk/index.js'
import { createError, ErrorCodes } from '../errors.js'
import type { FlagValues } from './command.js'
import { buildAndPush, pushTarget } from './image.js'
import { createProgress } from './progress.js'
import { parseMebibytes, parseMilliseconds, parseNumber, parsePairs } from './units.js'

export const SANDBOX_FLAGS = {
  backend: { type: 'string', value: 'B', help: 'function, container or microvm (container when an image is named, else function)' },
  image: { type: 'string', value: 'N:T', help: 'the base layer, by name:tag or sha256:digest' },
  workspace: { type: 'string', value: 'N:T', help: 'a workspace layer over the base (over busybox when no base is named)' },
  tools: { type: 'string', value: 'T1,T2', help: 'tools layers over the workspace, in order' },
  snapshot: { type: 'string', value: 'ID', help: 'start from a snapshot (its id or name:tag) instead of an image: its files and its spec' },
  'image-dir': { type: 'string', value: 'DIR', help: 'build a base layer from DIR here and push it to the control plane (a key that may push)' },
  store: { type: 'string', value: 'BLOBS', help: 'push the --image-dir layer into this local blob store directory instead' },
  ttl: { type: 'string', value: 'DURATION', help: 'how long the sandbox lives: milliseconds, or 30s, 10m, 2h' },
  label: { type: 'string', multiple: true, value: 'K=V', help: 'a label to find it by with warren ps --label' },
  cpus: { type: 'string', value: 'N', help: 'CPUs it may use (0.5, 2; a microvm gets that many vCPUs, rounded up)' },
  memory: { type: 'string', value: 'SIZE', help: 'its memory: MiB, or 512MiB, 2GiB (a microvm\'s guest memory)' },
  disk: { type: 'string', value: 'SIZE', help: 'its writable layer: MiB, or 512MiB, 4GiB (ENOSPC inside past it)' },
  pids: { type: 'string', value: 'N', help: 'the most processes and threads it may have' },
  env: { type: 'string', multiple: true, value: 'K=V', help: 'an environment variable of its commands' },
  egress: { type: 'string', multiple: true, value: 'HOST', help: 'a host its commands may reach through its egress proxy (pypi.org, *.example.com, host:443)' },
  deterministic: { type: 'boolean', help: 'fixed hostname, TZ, LANG, SOURCE_DATE_EPOCH and a seed drawn once (WARREN_SEED)' },
  seed: { type: 'string', value: 'N', help: 'with --deterministic: this seed (0 to 4294967295) instead of a drawn one' }
} as const

export type SandboxFlagValues = FlagValues<typeof SANDBOX_FLAGS>

/** `--label k=v` pairs as a map; a pair without `=` or with an empty key is refused. */
export function parseLabels (pairs: string[] | undefined): Record<string, string> | undefined {
  return parsePairs(pairs, 'label')
}

/**
 * A base layer built from `dir` the operator's way (as `warren image build --from-dir` does:
 * built here, pushed to the configured control plane, or to the blob store directory `store`),
 * named by its digest.
 */
async function layerFromDir (dir: string, store: string | undefined): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), 'warren-run-'))
  try {
    const progress = createProgress(2)
    const pushed = await buildAndPush(resolve(dir), pushTarget(store), 'base', work, progress)
    progress.done()
    return pushed.digest
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

/**
 * The create spec the flags describe. `--image-dir` builds and pushes its layer first.
 * @throws INVALID_ARGUMENT naming the flag (both --image and --image-dir, a bad --ttl, --label,
 *   --env or limit)
 */
export async function sandboxSpec (flags: SandboxFlagValues): Promise<CreateSpec> {
  if (flags.image !== undefined && flags['image-dir'] !== undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'give --image or --image-dir, not both', { field: 'image-dir' })
  const layered = (['image', 'image-dir', 'workspace', 'tools'] as const).find((f) => flags[f] !== undefined)
  if (flags.snapshot !== undefined && layered !== undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, `give --snapshot or --${layered}, not both: the snapshot holds the layers`, { field: layered })
  if (flags.store !== undefined && flags['image-dir'] === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, '--store goes with --image-dir', { field: 'store' })
  const labels = parseLabels(flags.label)
  const limits = limitsSpec(flags)
  const env = parsePairs(flags.env, 'env', 'NAME=value')
  const network = flags.egress !== undefined ? { egress: flags.egress } : undefined
  const given: Pick<CreateSpec, 'limits' | 'env' | 'network'> = {
    ...(limits !== undefined ? { limits } : {}),
    ...(env !== undefined ? { env } : {}),
    ...(network !== undefined ? { network } : {})
  }
  const ttlMs = flags.ttl !== undefined ? parseMilliseconds(flags.ttl, 'ttl') : undefined
  const tools = flags.tools?.split(',').map((t) => t.trim()).filter((t) => t !== '')
  if (tools !== undefined && tools.length === 0) throw createError(ErrorCodes.INVALID_ARGUMENT, '--tools takes a comma-separated list of layers', { field: 'tools' })
  // --image names a base layer (name:tag or sha256:…). --image-dir is the operator's: the
  // layer is built here and pushed, and the create names its digest. A workspace or tools
  // without a base go over the built-in base; the cluster checks each layer's kind.
  const base = flags.image ?? (flags['image-dir'] !== undefined ? await layerFromDir(flags['image-dir'], flags.store) : undefined)
  const image: CreateSpec['image'] = base === undefined && flags.workspace === undefined && tools === undefined
    ? undefined
    : { base: base ?? 'busybox', ...(flags.workspace !== undefined ? { workspace: flags.workspace } : {}), ...(tools !== undefined ? { tools } : {}) }
  if (flags.snapshot !== undefined) {
    // The snapshot's spec is the default; only what the flags say is laid over it.
    return {
      snapshot: flags.snapshot,
      ...(flags.backend !== undefined ? { backend: flags.backend as CreateSpec['backend'] } : {}),
      ...(ttlMs !== undefined ? { ttlMs } : {}),
      ...(labels !== undefined ? { labels } : {}),
      ...given,
      ...deterministicSpec(flags)
    }
  }
  return {
    // The server checks the kind (and names it when no node offers it).
    backend: (flags.backend ?? (image !== undefined ? 'container' : 'function')) as CreateSpec['backend'],
    ...(image !== undefined ? { image } : {}),
    ...(ttlMs !== undefined ? { ttlMs } : {}),
    ...(labels !== undefined ? { labels } : {}),
    ...given,
    ...deterministicSpec(flags)
  }
}

/**
 * `--cpus --memory --disk --pids` as the spec's limits (only those given: the backend's defaults,
 * or a snapshot's, fill the rest). Only their form is checked here; the control plane holds the
 * bounds and names `limits.*` past them.
 * @throws INVALID_ARGUMENT naming the flag when its value is not a number (or a size)
 */
function limitsSpec (flags: SandboxFlagValues): CreateSpec['limits'] {
  const number = (field: 'cpus' | 'pids'): number | undefined =>
    flags[field] === undefined ? undefined : parseNumber(flags[field], `--${field}`, { whole: field === 'pids' })
  const size = (field: 'memory' | 'disk'): number | undefined =>
    flags[field] === undefined ? undefined : parseMebibytes(flags[field], field)
  const limits = { cpus: number('cpus'), memoryMiB: size('memory'), diskMiB: size('disk'), pids: number('pids') }
  const set = Object.entries(limits).filter(([, v]) => v !== undefined)
  return set.length === 0 ? undefined : Object.fromEntries(set)
}

/**
 * `--deterministic [--seed N]` as a spec field (the control plane checks the seed's bounds).
 * @throws INVALID_ARGUMENT naming `seed` when it is given without --deterministic or is not a number
 */
function deterministicSpec (flags: SandboxFlagValues): Pick<CreateSpec, 'deterministic'> {
  if (flags.seed !== undefined && flags.deterministic !== true) throw createError(ErrorCodes.INVALID_ARGUMENT, '--seed goes with --deterministic', { field: 'seed' })
  if (flags.deterministic !== true) return {}
  if (flags.seed === undefined) return { deterministic: true }
  return { deterministic: { seed: parseNumber(flags.seed, '--seed', { whole: true }) } }
}
