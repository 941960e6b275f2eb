/**
 * `warren create`, `warren run` and `warren exec`. `run` creates a sandbox, runs one command in
 * it with this process's stdin and output, exits with the command's code and kills the sandbox —
 * also on Ctrl-C (exit 130) or when the reader of its output goes away. `exec` does the same in a
 * sandbox that exists, and a stop kills its command, not the sandbox.
 */
import { once } from 'node:events'
import type { Readable } from 'node:stream'
import type { ExecHandle, ExecOptions, Sandbox } from '../sdk/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { withClient } from './client.js'
import { sandboxSpec, type SandboxFlagValues } from './sandbox-flags.js'
import { Stopped, stopRequested, unlessStopped } from './stop.js'

export interface Io { stdin: Readable & { isTTY?: boolean }, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream }
const std: Io = { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }

export const RunDefaults = {
  /**
   * The most stdin `warren run` reads ahead for a backend that takes stdin only up front (the
   * function backend): it travels in the exec request, which must fit a frame.
   */
  upFrontStdinBytes: 512 * 1024,
  /** After a stop has killed the sandbox, how long its command's end is awaited before the client closes anyway. */
  settleAfterKillMs: 5_000
}

/** `warren create`: prints the new sandbox's id, and only that, on stdout (`ID=$(warren create)`). */
export async function create (flags: SandboxFlagValues, io: Io = std): Promise<number> {
  const spec = await sandboxSpec(flags)
  return await withClient(async (client) => {
    const sb = await client.create(spec)
    io.stdout.write(`${sb.id}\n`)
    return 0
  })
}

type StdinPlan = { kind: 'none' } | { kind: 'up-front', bytes: Uint8Array } | { kind: 'stream' }

/**
 * Reads all of `input` for a backend that takes stdin up front.
 * @throws INVALID_ARGUMENT (field `stdin`) past `RunDefaults.upFrontStdinBytes`
 */
async function readUpFront (input: Readable, backend: string): Promise<Uint8Array> {
  const chunks: Buffer[] = []
  let total = 0
  for await (const chunk of input) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string)
    total += b.length
    if (total > RunDefaults.upFrontStdinBytes) {
      input.destroy()
      throw createError(ErrorCodes.INVALID_ARGUMENT, `stdin holds more than ${RunDefaults.upFrontStdinBytes} bytes: the ${backend} backend takes stdin up front, up to that; a container sandbox streams any amount (or give --no-stdin)`, { field: 'stdin' })
    }
    chunks.push(b)
  }
  return Buffer.concat(chunks)
}

/** Writes `data`, waiting for `out` to drain when it is full: the command's output is paced by its reader. */
async function write (out: NodeJS.WritableStream, data: Uint8Array): Promise<void> {
  if (!out.write(data)) await once(out, 'drain')
}

/** Pipes `input` into the command's stdin, a chunk at a time (each write resolves once the sandbox holds it), then EOF. */
async function feed (h: ExecHandle, input: Readable): Promise<void> {
  for await (const chunk of input) await h.write(chunk as Uint8Array)
  await h.closeStdin()
}

/**
 * How stdin reaches a command of `backend`: not at all when it is a terminal or `--no-stdin`,
 * read ahead (bounded) for the function backend, streamed to any other (and to a snapshot's,
 * `backend` undefined). Stoppable (Ctrl-C while stdin is read ahead).
 */
async function planStdin (backend: string | undefined, flags: { 'no-stdin'?: boolean }, io: Io): Promise<StdinPlan> {
  if (flags['no-stdin'] === true || io.stdin.isTTY === true) return { kind: 'none' }
  if (backend !== 'function') return { kind: 'stream' }
  return { kind: 'up-front', bytes: await unlessStopped(readUpFront(io.stdin, 'function')) }
}

/** Starts `cmd` in `sb`, its stdin as planned. */
function start (sb: Sandbox, cmd: string[], stdin: StdinPlan): ExecHandle {
  const opts: Omit<ExecOptions, 'onStdout' | 'onStderr'> = stdin.kind === 'up-front' ? { stdin: stdin.bytes } : stdin.kind === 'stream' ? { openStdin: true } : {}
  return sb.spawn(cmd, opts)
}

/** Runs the started command `h` to its end, its output to ours; resolves with its exit code. */
async function runIn (h: ExecHandle, stdin: StdinPlan, io: Io): Promise<number> {
  let feedError: unknown
  const feeding = stdin.kind === 'stream' ? feed(h, io.stdin).catch((err: unknown) => { feedError = err }) : undefined
  try {
    // After a stop the output is still read to its end (so the pump settles before the client
    // closes), but goes nowhere: the reader is gone, or the user asked to stop.
    for await (const c of h) {
      if (stopRequested() !== undefined) continue
      // A write that fails because the reader went away is that stop (stop.ts sees the EPIPE first).
      await write(c.stream === 'stdout' ? io.stdout : io.stderr, c.data).catch((err: unknown) => { if (stopRequested() === undefined) throw err })
    }
    const r = await h.wait()
    // After a stop the command's end (killed) is ours, not news.
    if (stopRequested() !== undefined) return r.exitCode
    if (r.truncated) io.stderr.write('warren: output truncated at the cap\n')
    if (r.reason !== undefined) io.stderr.write(`warren: command ended: ${r.reason}${r.message !== undefined ? ` (${r.message})` : ''}\n`)
    if (feedError !== undefined) io.stderr.write(`warren: stdin was not all passed on: ${feedError instanceof Error ? feedError.message : String(feedError)}\n`)
    return r.exitCode
  } finally {
    // The command has ended: what is left of our stdin goes nowhere, and reading it must not keep the process alive.
    if (feeding !== undefined) { io.stdin.destroy(); await feeding }
  }
}

/** Awaits `running` after its command or sandbox was killed, for at most `RunDefaults.settleAfterKillMs`. */
async function settle (running: Promise<unknown>): Promise<void> {
  await Promise.race([running.catch(() => {}), new Promise((resolve) => setTimeout(resolve, RunDefaults.settleAfterKillMs).unref())])
}

/** The flag `warren run` and `warren exec` share. */
export const STDIN_FLAGS = {
  'no-stdin': { type: 'boolean', help: 'give the command no stdin (EOF at once)' }
} as const

export interface ExecFlags { 'no-stdin'?: boolean }
export interface RunFlags extends SandboxFlagValues, ExecFlags {}

/**
 * `warren exec ID [--no-stdin] -- CMD…`: runs CMD in sandbox ID with our stdin and output, and
 * exits with its code. A stop kills the command (the sandbox stays), as a remote command over
 * ssh ends with its terminal: else `warren exec ID -- yes | head -1` would leave `yes` running.
 */
export async function exec (id: string, cmd: string[], flags: ExecFlags = {}, io: Io = std): Promise<number> {
  return await withClient(async (client) => {
    try {
      const sb = await unlessStopped(client.attach(id))
      const { backend } = await unlessStopped(sb.info())
      const stdin = await planStdin(backend, flags, io)
      const h = start(sb, cmd, stdin)
      const running = runIn(h, stdin, io)
      try {
        return await unlessStopped(running)
      } catch (err) {
        if (!(err instanceof Stopped)) throw err
        await h.kill().catch(() => {})
        await settle(running)
        throw err
      } finally {
        if (stdin.kind === 'stream') io.stdin.destroy()
      }
    } catch (err) {
      if (err instanceof Stopped) return err.stop.exitCode
      throw err
    }
  })
}

/**
 * `warren run [flags] -- CMD…`: create, run with our stdin and output, exit with the command's
 * code, kill. Stdin is passed on unless it is a terminal or --no-stdin is given: streamed with
 * backpressure to a container sandbox, read ahead (bounded) for the function backend.
 */
export async function run (cmd: string[], flags: RunFlags, io: Io = std): Promise<number> {
  const spec = await sandboxSpec(flags)
  let stdin: StdinPlan
  try {
    stdin = await planStdin(spec.backend, flags, io)
  } catch (err) {
    if (err instanceof Stopped) return err.stop.exitCode
    throw err
  }
  return await withClient(async (client) => {
    const creating = client.create(spec)
    let sb: Sandbox
    try {
      sb = await unlessStopped(creating)
    } catch (err) {
      // Stopped while the create was on its way: the sandbox it makes is killed as soon as it exists.
      if (err instanceof Stopped) { await creating.then(async (s) => { await s.kill() }, () => {}); return err.stop.exitCode }
      throw err
    }
    const running = runIn(start(sb, cmd, stdin), stdin, io)
    try {
      return await unlessStopped(running)
    } catch (err) {
      if (!(err instanceof Stopped)) throw err
      // The sandbox is killed first; then its command's end is awaited (bounded), so nothing
      // of it is still asking the cluster when the client closes.
      await sb.kill()
      await settle(running)
      return err.stop.exitCode
    } finally {
      await sb.kill()
      if (stdin.kind === 'stream') io.stdin.destroy()
    }
  })
}
