/**
 * `warren up` as a child process with its own data dir, for tests that crash the control plane
 * for real (SIGKILL) and start it again on the same state.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { repoRoot } from '../cluster/harness.js'

export const cli = join(repoRoot, 'bin', 'warren.js')

export interface UpProcess {
  proc: ChildProcess
  /** The gateway's URL and the admin token it printed. */
  url: string
  token: string
  /** Sends `signal` (default SIGKILL) and waits for the process to be gone. */
  kill (signal?: NodeJS.Signals): Promise<void>
}

/** How a `warren up` that did not come up ended. */
export interface UpFailure { exitCode: number | null, output: string }

/**
 * Starts `warren up --no-local-node` on a free port. Resolves once it printed its URL and token,
 * or with an UpFailure when it exited first; rejects only when it did neither within `timeoutMs`.
 * @param configFile where the CLI writes its config (never the user's ~/.warren)
 * @param extraArgs more flags of `warren up` (`--rotate-admin-key`)
 */
export function startUp (dataDir: string, configFile: string, timeoutMs = 20_000, extraArgs: string[] = []): Promise<UpProcess | UpFailure> {
  return startUpWith(['--no-local-node', '--port', '0', '--data-dir', dataDir, ...extraArgs], configFile, timeoutMs)
}

/** As `startUp`, with every flag of `warren up` given (a local node, a fixed port to come back on). */
export function startUpWith (args: string[], configFile: string, timeoutMs = 20_000): Promise<UpProcess | UpFailure> {
  const proc = spawn(process.execPath, [cli, 'up', ...args], {
    env: { ...process.env, WARREN_CONFIG: configFile },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()))
  const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
    await exited
  }
  return new Promise((resolve, reject) => {
    let out = ''
    const timer = setTimeout(() => { void kill(); reject(new Error(`warren up neither came up nor exited: ${out}`)) }, timeoutMs)
    proc.stdout!.on('data', (b: Buffer) => {
      out += b.toString()
      const url = /url:\s+(ws:\/\/\S+)/.exec(out)?.[1]
      const token = /token:\s+(wrn_\S+)/.exec(out)?.[1]
      if (url !== undefined && token !== undefined && out.includes('Ctrl-C')) { clearTimeout(timer); resolve({ proc, url, token, kill }) }
    })
    proc.stderr!.on('data', (b: Buffer) => { out += b.toString() })
    proc.once('exit', (code) => { clearTimeout(timer); resolve({ exitCode: code, output: out }) })
  })
}

/** Narrows a startUp result, failing with what the process printed when it did not come up. */
export function mustBeUp (r: UpProcess | UpFailure): UpProcess {
  if ('exitCode' in r) throw new Error(`warren up exited ${String(r.exitCode)}: ${r.output}`)
  return r
}
