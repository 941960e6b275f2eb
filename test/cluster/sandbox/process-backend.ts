/**
 * A small real backend for sandbox actor tests where a container is not the point: each
 * sandbox is a directory, each command a host process group in it, a pause is SIGSTOP to every
 * group (SIGCONT resumes), and a snapshot is a file of the directory's listing. What it freezes
 * is really frozen: a loop that prints the time stops printing.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Backend, ExecOptions, ExecResult, SandboxHandle, SandboxSpec, SnapshotLayer } from '../../../src/backends/types.js'
import { createError, ErrorCodes } from '../../../src/errors.js'

interface Box { handle: SandboxHandle, dir: string, procs: Set<ChildProcess>, frozen: boolean, spec: SandboxSpec | undefined }

export interface ProcessBackend extends Backend {
  /** Calls made, in order (`pause:ID`, `resume:ID`, `snapshot:ID`). */
  readonly calls: string[]
  /** The spec a sandbox was created with. */
  specOf (handle: SandboxHandle): SandboxSpec | undefined
}

export function createProcessBackend (): ProcessBackend {
  const boxes = new Map<string, Box>()
  const calls: string[] = []
  let next = 0
  const box = (h: SandboxHandle): Box => {
    const b = boxes.get(h.id)
    if (b === undefined) throw createError(ErrorCodes.SANDBOX_GONE, `no sandbox ${h.id}`)
    return b
  }
  const signalAll = (b: Box, signal: NodeJS.Signals): void => {
    for (const p of b.procs) try { process.kill(-p.pid!, signal) } catch {}
  }
  const unsupported = async (): Promise<never> => { throw createError(ErrorCodes.UNSUPPORTED, 'no files here') }
  return {
    kind: 'container',
    snapshots: true,
    calls,
    specOf: (h) => boxes.get(h.id)?.spec,
    async create (spec) {
      const handle: SandboxHandle = { id: `p${next++}`, kind: 'container' }
      boxes.set(handle.id, { handle, dir: mkdtempSync(join(tmpdir(), 'warren-pb-')), procs: new Set(), frozen: false, spec })
      return handle
    },
    async exec (h, argv, opts: ExecOptions = {}): Promise<ExecResult> {
      const b = box(h)
      const started = Date.now()
      const p = spawn(argv[0]!, argv.slice(1), { cwd: b.dir, detached: true, env: { PATH: process.env.PATH ?? '', ...b.spec?.env, ...opts.env }, stdio: ['ignore', 'pipe', 'pipe'] })
      b.procs.add(p)
      if (b.frozen) signalAll(b, 'SIGSTOP')
      p.stdout!.on('data', (c: Buffer) => opts.onStdout?.(new Uint8Array(c)))
      p.stderr!.on('data', (c: Buffer) => opts.onStderr?.(new Uint8Array(c)))
      const abort = (): void => { try { process.kill(-p.pid!, 'SIGKILL') } catch {} }
      opts.signal?.addEventListener('abort', abort)
      return await new Promise((resolve, reject) => {
        p.once('error', reject)
        p.once('close', (code, signal) => {
          b.procs.delete(p)
          opts.signal?.removeEventListener('abort', abort)
          resolve(signal !== null ? { exitCode: 137, durationMs: Date.now() - started, truncated: false, reason: 'killed' } : { exitCode: code ?? 0, durationMs: Date.now() - started, truncated: false })
        })
      })
    },
    files: { maxChunkBytes: 1024, read: unsupported, write: unsupported, list: unsupported, stat: unsupported, mkdir: unsupported, remove: unsupported, rename: unsupported, symlink: unsupported },
    async pause (h) {
      const b = box(h)
      calls.push(`pause:${h.id}`)
      b.frozen = true
      signalAll(b, 'SIGSTOP')
    },
    async resume (h) {
      const b = box(h)
      calls.push(`resume:${h.id}`)
      b.frozen = false
      signalAll(b, 'SIGCONT')
      return undefined
    },
    async snapshot (h, opts): Promise<SnapshotLayer> {
      const b = box(h)
      calls.push(`snapshot:${h.id}${opts?.flatten === true ? ':flat' : ''}`)
      const path = join(tmpdir(), `warren-pb-snap-${h.id}-${calls.length}`)
      writeFileSync(path, readdirSync(b.dir).sort().join('\n'))
      const digest = `sha256:${createHash('sha256').update(readdirSync(b.dir).sort().join('\n')).digest('hex')}`
      return { digest, path, bytes: statSync(path).size }
    },
    async kill (h) {
      const b = boxes.get(h.id)
      if (b === undefined) return
      boxes.delete(h.id)
      signalAll(b, 'SIGKILL')
      signalAll(b, 'SIGCONT')
      rmSync(b.dir, { recursive: true, force: true })
    },
    async close () {
      for (const b of [...boxes.values()]) await this.kill(b.handle)
    }
  }
}
