/**
 * The CLI's tests drive the real `warren` binary as child processes: `warren up` in one, each
 * command in another, as a user's shell would.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { repoRoot } from '../cluster/harness.js'
import type { Cleanup } from '../support/index.js'

export const cli = join(repoRoot, 'bin', 'warren.js')

export interface Ran { status: number | null, signal: NodeJS.Signals | null, stdout: string, stderr: string }

/**
 * Runs `warren ...args` to its end.
 * @param input written to its stdin, which then ends (no input: stdin ends at once)
 */
export function warren (args: string[], opts: { env?: NodeJS.ProcessEnv, input?: Uint8Array | string, timeoutMs?: number } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], { env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (b: Buffer) => { stdout += b.toString() })
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString() })
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`warren ${args.join(' ')} outlived ${opts.timeoutMs ?? 30_000} ms: ${stderr}`)) }, opts.timeoutMs ?? 30_000)
    child.once('exit', (status, signal) => {
      clearTimeout(timer)
      // Output still in the pipes arrives before 'close'.
      child.once('close', () => resolve({ status, signal, stdout, stderr }))
    })
    child.stdin.on('error', () => {}) // a command that does not read its stdin may end first
    child.stdin.end(opts.input)
  })
}

/** The exit of a child, once it comes. */
export function exited (child: ChildProcess): Promise<{ status: number | null, signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve({ status: child.exitCode, signal: child.signalCode })
  return new Promise((resolve) => child.once('exit', (status, signal) => resolve({ status, signal })))
}

export interface Up {
  env: NodeJS.ProcessEnv
  dir: string
  url: string
  port: number
  /** What `warren up` printed until it was up. */
  banner: string
  proc: ChildProcess
}

/** `warren up --port 0` in its own directory, with its config for the commands; stopped by `defer`. */
export async function warrenUp (defer: Cleanup['defer']): Promise<Up> {
  const dir = mkdtempSync(join(tmpdir(), 'warren-cli-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  const env = { ...process.env, WARREN_CONFIG: join(dir, 'config.json') }
  const up = spawn(process.execPath, [cli, 'up', '--port', '0', '--data-dir', join(dir, 'data')], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  defer(async () => { if (up.exitCode === null) { up.kill('SIGTERM'); await exited(up) } })
  let out = ''
  await new Promise<void>((resolve, reject) => {
    up.stdout.on('data', (b: Buffer) => { out += b.toString(); if (out.includes('Ctrl-C')) resolve() })
    up.stderr.on('data', (b: Buffer) => { out += b.toString() })
    up.once('exit', (code) => reject(new Error(`warren up exited ${code}: ${out}`)))
  })
  const url = /url:\s+(ws:\/\/\S+)/.exec(out)![1]!
  return { env, dir, url, port: Number(new URL(url).port), banner: out, proc: up }
}
