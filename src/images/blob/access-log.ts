/**
 * Which chunks a cold start reads, per layer, so the next cold start can fetch them before they
 * are asked for. Kept apart from the layer's cache directory (`<cache>/access/<hex>.json`) so it
 * outlives the layer's eviction — that is exactly when it is needed.
 *
 * A record is the chunk indices in the order they were first read, for one chunk size (a layer
 * pushed again with another chunk size makes the old record meaningless, so it is ignored).
 */
import { randomUUID } from 'node:crypto'
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { isDigest } from './digest.js'

export interface AccessRecord {
  digest: string
  chunkBytes: number
  /** Chunk indices in first-read order, no repeats. */
  chunks: number[]
}

/** The record file of a layer under a cache directory. */
export function accessLogPath (cacheDir: string, hex: string): string {
  return join(cacheDir, 'access', `${hex}.json`)
}

/** Loads a record; undefined when there is none or it does not parse. */
export async function loadAccessLog (path: string): Promise<AccessRecord | undefined> {
  let raw: unknown
  try {
    raw = JSON.parse(await readFile(path, 'utf8'))
  } catch {
    return undefined
  }
  const o = raw as Partial<AccessRecord> | null
  if (o === null || typeof o !== 'object' || !isDigest(o.digest) || typeof o.chunkBytes !== 'number' || !Array.isArray(o.chunks)) return undefined
  const chunks = o.chunks.filter((i): i is number => Number.isSafeInteger(i) && i >= 0)
  return { digest: o.digest, chunkBytes: o.chunkBytes, chunks }
}

/** Writes a record atomically (a reader sees the old one or the new one). */
export async function saveAccessLog (path: string, record: AccessRecord): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  const tmp = `${path}.${randomUUID()}.tmp`
  try {
    await writeFile(tmp, JSON.stringify(record) + '\n')
    await rename(tmp, path)
  } finally {
    await rm(tmp, { force: true })
  }
}

/** Collects first reads of chunks during a cold start, up to a bound. */
export class AccessRecorder {
  private readonly seen = new Set<number>()
  private readonly order: number[] = []

  constructor (private readonly max: number) {}

  /** Notes a read of chunk `index`; repeats and reads past the bound are ignored. */
  note (index: number): void {
    if (this.order.length >= this.max || this.seen.has(index)) return
    this.seen.add(index)
    this.order.push(index)
  }

  /** The chunks noted, in first-read order. */
  chunks (): number[] {
    return [...this.order]
  }
}
