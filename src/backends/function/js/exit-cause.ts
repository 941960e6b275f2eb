/**
 * Why a `js` child process died, from what the node can see of it: its exit code or signal and
 * the end of its stderr. Only Node itself writes to a child's stderr (the sandbox has no way
 * to it), so a heap-limit message there is V8's own word.
 */

/** What is known about a dead child. */
export interface ChildExit {
  code: number | null
  signal: NodeJS.Signals | null
  /** The node killed it (timeout, kill, retirement, close). */
  killedByNode: boolean
  /** V8 reported heap exhaustion on stderr. */
  heapExhausted: boolean
  /** The last line Node wrote to stderr before the end, if any. */
  lastError: string
  /** Set when the process could not be started at all. */
  spawnError?: string
}

/**
 * V8 / Node messages of a process that ran out of heap, printed before it aborts: "FATAL ERROR:
 * Reached heap limit … JavaScript heap out of memory", "CALL_AND_RETRY_LAST", "Fatal process out
 * of memory: …", "Fatal JavaScript OOM in …" (the last ends in SIGTRAP rather than SIGABRT).
 */
const HEAP_EXHAUSTED = /JavaScript heap out of memory|Reached heap limit|CALL_AND_RETRY_LAST|Fatal process out of memory|Fatal JavaScript OOM/i

/** True when `stderrText` shows V8's heap exhaustion. */
export function showsHeapExhaustion (stderrText: string): boolean {
  return HEAP_EXHAUSTED.test(stderrText)
}

/** How the process ended, for messages: "was killed by SIGABRT", "exited with code 70: …". */
export function describeExit (exit: ChildExit): string {
  if (exit.spawnError !== undefined) return `could not be started: ${exit.spawnError}`
  const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${String(exit.code)}`
  if (exit.heapExhausted) return `${how} (heap limit reached)`
  return exit.lastError === '' ? how : `${how}: ${exit.lastError}`
}

/** The reason and message an ExecResult gives for a child that died running a call. */
export function causeOfDeath (exit: ChildExit): { reason: 'oom' | 'crashed' | 'killed', message: string } {
  if (exit.killedByNode) return { reason: 'killed', message: 'killed' }
  if (exit.heapExhausted) return { reason: 'oom', message: `the js call ran out of memory: its process ${describeExit(exit)}` }
  return { reason: 'crashed', message: `the js process ${describeExit(exit)}` }
}
