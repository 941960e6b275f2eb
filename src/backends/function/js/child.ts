/**
 * One `js` child process, node side: started with only the flags the sandbox needs, watched
 * until it is gone, and described when it dies (see exit-cause.ts).
 *
 * How it is started, and why:
 * - `node` with an explicit flag list, not the node's execArgv (which may hold flags meant for
 *   the node alone, e.g. a loader) and an empty environment (no NODE_OPTIONS, no tokens).
 * - `--max-old-space-size` / `--max-semi-space-size` from the backend's memory limits: in a
 *   process of its own V8's heap limit is exact, and exceeding it aborts only this process.
 * - `--experimental-vm-modules`, without which run-js.ts refuses to run (see there), and
 *   `--disallow-code-generation-from-strings`, so even the child's own realm has no eval.
 * - Through `/bin/sh -c 'ulimit -c 0; exec …'` where there is one: a heap-limit abort is a
 *   SIGABRT, and untrusted code must not be able to fill the disk with core dumps.
 * - stdin and stdout ignored, stderr piped (only Node writes there: the heap-limit message),
 *   and the IPC channel for calls and output.
 * - An idle child does not keep the node's process alive (it is unref'd); a busy or dying one
 *   does, so a call's result, which waits for the child's answer or death, always comes.
 * - In the jail of `jail.ts` (unless the pool was built with isolation 'none'): the shell execs
 *   bwrap, which ends the child with the node, so the child needs no orphan watch of its own
 *   (its parent pid argument is 0). A machine that cannot jail it gets a child that fails to
 *   start, saying why.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, existsSync, openSync } from 'node:fs'
import type { Socket } from 'node:net'
import { parse } from 'node:path'
import { fileURLToPath } from 'node:url'
import { showsHeapExhaustion, type ChildExit } from './exit-cause.js'
import { jailCommand, SECCOMP_FD, signalOfJailExit, type JsJailOptions } from './jail.js'
import { isChildMessage, type ChildMessage, type RunMessage } from './protocol.js'
import { reapOnExit } from './reaper.js'

/** The compiled child entry, next to this file in dist/. */
const ENTRY = fileURLToPath(new URL('./child-main.js', import.meta.url))

const SHELL = '/bin/sh'
/** Drops the core-file limit to 0, then becomes node ("$@"); a failing ulimit does not stop it. */
const NO_CORE_SCRIPT = 'ulimit -c 0 2>/dev/null; exec "$@"'

/** How long after its exit a child's stdio may take to end before it is closed by force. */
const STREAMS_AFTER_EXIT_MS = 1000

/** How much of a child's stderr is kept to explain its death. */
const STDERR_TAIL_CHARS = 8192

/** The heap limits of a child, as the backend's resourceLimits give them. */
export interface JsHeapLimits {
  maxOldGenerationSizeMb?: number
  maxYoungGenerationSizeMb?: number
}

/** What a child reports. */
export interface JsChildHandlers {
  onMessage (msg: ChildMessage): void
  /** Once, when the process is gone and its stderr read to the end. */
  onExit (exit: ChildExit): void
}

/** A started child. */
export interface JsChild {
  /** Undefined when the process could not be spawned. */
  readonly pid: number | undefined
  /** Hands the child a call. A child that cannot take it is killed; its exit tells the rest. */
  send (msg: RunMessage): void
  /** SIGKILL, recorded as the node's doing. Idempotent. */
  kill (): void
  /** Whether the child keeps the node's event loop alive (true while it has a call). */
  hold (on: boolean): void
}

/** The node flags of a child with `limits`. */
export function childNodeFlags (limits: JsHeapLimits): string[] {
  const flags = ['--experimental-vm-modules', '--disallow-code-generation-from-strings', '--no-warnings']
  if (limits.maxOldGenerationSizeMb !== undefined) {
    flags.push(`--max-old-space-size=${Math.max(1, Math.round(limits.maxOldGenerationSizeMb))}`)
  }
  if (limits.maxYoungGenerationSizeMb !== undefined) {
    // V8's young generation is three semi-spaces (two halves plus the new large-object space).
    flags.push(`--max-semi-space-size=${Math.max(1, Math.floor(limits.maxYoungGenerationSizeMb / 3))}`)
  }
  return flags
}

let shellAvailable: boolean | undefined

/** Starts a child, jailed as `jail` says. */
export function spawnJsChild (limits: JsHeapLimits, jail: JsJailOptions, handlers: JsChildHandlers): JsChild {
  const jailed = jail.isolation === 'jail'
  let [file, args] = [process.execPath, [...childNodeFlags(limits), ENTRY, String(process.pid)]]
  const stdio: Array<'ignore' | 'pipe' | 'ipc' | number> = ['ignore', 'ignore', 'pipe', 'ipc']
  let filterFd: number | undefined
  if (jailed) {
    const command = jailCommand(jail, childNodeFlags(limits), ENTRY, ['0'])
    if (typeof command === 'string') return unstartable(command, handlers)
    try {
      filterFd = openSync(command.seccompPath, 'r')
    } catch (err) {
      return unstartable(`cannot open ${command.seccompPath}: ${(err as Error).message}`, handlers)
    }
    ;[file, args] = [command.file, command.args]
    stdio[SECCOMP_FD] = filterFd
  }
  shellAvailable ??= process.platform !== 'win32' && existsSync(SHELL)
  if (shellAvailable) [file, args] = [SHELL, ['-c', NO_CORE_SCRIPT, 'warren-js', file, ...args]]
  let child: ChildProcess
  try {
    child = spawn(file, args, {
      stdio,
      serialization: 'advanced',
      env: {},
      // No directory of the node's (a core file or a held mount point would land there).
      cwd: parse(process.execPath).root,
      // A process group of its own, killed whole: bwrap killed while it starts the jail can
      // leave the jail's first process behind, before that one has asked to die with it.
      detached: process.platform !== 'win32',
      windowsHide: true
    })
  } finally {
    // The child has its own copy; bwrap reads the filter from it and closes it.
    if (filterFd !== undefined) closeSync(filterFd)
  }
  const killAll = (): void => {
    if (child.pid !== undefined && process.platform !== 'win32') {
      try { process.kill(-child.pid, 'SIGKILL'); return } catch {}
    }
    child.kill('SIGKILL')
  }
  reapOnExit(child, killAll)

  let killedByNode = false
  let spawnError: string | undefined
  let stderrTail = ''
  let heapExhausted = false

  const stderr = child.stderr!
  stderr.setEncoding('utf8')
  stderr.on('data', (text: string) => {
    stderrTail = (stderrTail + text).slice(-STDERR_TAIL_CHARS)
    if (!heapExhausted && showsHeapExhaustion(stderrTail)) heapExhausted = true
  })
  child.on('message', (msg: unknown) => {
    if (isChildMessage(msg)) handlers.onMessage(msg)
  })
  child.on('error', (err: Error) => {
    // Also emitted for a failed kill or send; those end in an exit that tells the rest.
    if (child.pid === undefined) spawnError = err.message
  })
  let reported = false
  const report = (code: number | null, signal: NodeJS.Signals | null): void => {
    if (reported) return
    reported = true
    const jailSignal = jailed && signal === null ? signalOfJailExit(code) : null
    const exit: ChildExit = jailSignal !== null
      ? { code: null, signal: jailSignal, killedByNode, heapExhausted, lastError: lastErrorLine(stderrTail) }
      : { code, signal, killedByNode, heapExhausted, lastError: lastErrorLine(stderrTail) }
    if (spawnError !== undefined) exit.spawnError = spawnError
    handlers.onExit(exit)
  }
  // Reported once the process is gone and its stderr read to the end ('close'). Its stdio ends
  // with it, but if it does not (seen rarely with a jail killed while it starts), the exit is
  // reported a little later all the same, and the streams closed.
  child.once('exit', (code: number | null, signal: NodeJS.Signals | null) => {
    const late = setTimeout(() => {
      report(code, signal)
      stderr.destroy()
      if (child.connected) child.disconnect()
    }, STREAMS_AFTER_EXIT_MS)
    child.once('close', () => clearTimeout(late))
  })
  child.once('close', report)

  /** All three handles: the exit, the last IPC messages and the end of stderr are all awaited. */
  const hold = (on: boolean): void => {
    if (on) {
      child.ref()
      child.channel?.ref()
      ;(stderr as Socket).ref()
    } else {
      child.unref()
      child.channel?.unref()
      ;(stderr as Socket).unref()
    }
  }
  hold(false)

  const terminate = (): void => {
    hold(true)
    try { killAll() } catch {}
  }
  return {
    hold,
    pid: child.pid,
    send (msg) {
      if (!child.connected) {
        terminate()
        return
      }
      try {
        child.send(msg, undefined, undefined, (err) => { if (err !== null) terminate() })
      } catch {
        terminate()
      }
    },
    kill () {
      killedByNode = true
      terminate()
    }
  }
}

/** A child that could not be started: it reports its exit (a spawn error) in a later turn. */
function unstartable (why: string, handlers: JsChildHandlers): JsChild {
  setImmediate(() => handlers.onExit({ code: null, signal: null, killedByNode: false, heapExhausted: false, lastError: '', spawnError: why }))
  return { pid: undefined, send () {}, kill () {}, hold () {} }
}

/**
 * The line of `stderr` that best says what went wrong: a fatal error line if there is one,
 * else the last line that is not a stack or backtrace frame.
 */
function lastErrorLine (stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.trim()).filter((l) =>
    l !== '' && !/^at /.test(l) && !/^\d+: 0x[0-9a-f]+/.test(l) && !/^Node\.js v/.test(l) && !/^[-<=^]{1,}/.test(l))
  const fatal = lines.find((l) => /fatal/i.test(l))
  return (fatal ?? lines.at(-1) ?? '').slice(0, 500)
}
