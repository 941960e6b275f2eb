/**
 * Helpers every test file uses. uvu has no timeouts of its own, so each test that waits on I/O
 * wraps its body in `timed(ms, fn)`; resources a test starts are registered with `defer` and
 * released in reverse order whether the test passed or failed.
 */
import { readdirSync, readFileSync } from 'node:fs'

/** A list of clean-up functions run in reverse order, each at most once, errors collected. */
export interface Cleanup {
  /** Registers `fn` to run when the test ends. */
  defer (fn: () => unknown): void
  /** Runs every registered function, newest first. */
  run (): Promise<void>
}

export function createCleanup (): Cleanup {
  const fns: Array<() => unknown> = []
  return {
    defer (fn) { fns.push(fn) },
    async run () {
      const errors: unknown[] = []
      while (fns.length > 0) {
        const fn = fns.pop()!
        try { await fn() } catch (err) { errors.push(err) }
      }
      if (errors.length > 0) throw errors[0]
    }
  }
}

/**
 * Wraps a test body with a timeout and a clean-up list. The body gets `defer`; everything it
 * deferred runs after it, also when it throws or times out.
 * @param ms the test's own time limit
 * @param fn the test body
 */
export function timed (ms: number, fn: (defer: Cleanup['defer']) => unknown | Promise<unknown>): () => Promise<void> {
  return async () => {
    const cleanup = createCleanup()
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        Promise.resolve().then(() => fn(cleanup.defer)),
        new Promise((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`test timed out after ${ms} ms`)), ms)
        })
      ])
    } catch (err) {
      throw forReport(err)
    } finally {
      clearTimeout(timer)
      await cleanup.run()
    }
  }
}

/**
 * uvu's reporter expects `details` to be a string and dies silently on anything else; a
 * WarrenError's `details` is an object, so it is folded into the message here.
 */
function forReport (err: unknown): unknown {
  if (err === null || typeof err !== 'object') return err
  const e = err as { details?: unknown, code?: unknown, message?: string, stack?: string }
  if (e.details === undefined || typeof e.details === 'string') return err
  const plain = new Error(`${typeof e.code === 'string' ? e.code + ': ' : ''}${e.message ?? ''} ${JSON.stringify(e.details)}`)
  plain.stack = `${plain.message}\n${e.stack?.split('\n').slice(1).join('\n') ?? ''}`
  return plain
}

/** Resolves after `ms` milliseconds. Only for pacing, never as the thing a test depends on. */
export function sleep (ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * Polls `check` until it returns a truthy value (returned), or rejects after `ms`. Tests wait for
 * a condition this way instead of sleeping a guessed time.
 */
export async function waitFor<T> (check: () => T | Promise<T>, ms = 5000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v) return v as NonNullable<T>
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(5)
  }
}

/** Every process below `pid` (children, their children, ...), read from /proc. */
export function descendantsOf (pid: number): number[] {
  const parentOf = new Map<number, number>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      // "pid (comm) state ppid …"; comm may hold spaces and parentheses, so read after the last ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {}
  }
  const found: number[] = []
  for (let frontier = [pid]; frontier.length > 0;) {
    frontier = [...parentOf].filter(([, ppid]) => frontier.includes(ppid)).map(([child]) => child)
    found.push(...frontier)
  }
  return found
}
