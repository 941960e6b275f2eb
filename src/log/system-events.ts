/**
 * What an actor system reports, logged once each with its cause: an actor that failed (its
 * error), a supervisor that restarted a child (why the child ended), a supervisor that gave up
 * (its own failure, `WARREN_ERR_SUPERVISOR_INTENSITY`), and dead letters. Dead letters come by
 * the thousand when a mailbox is full, so they are counted: the first of a reason is logged at
 * once, then at most one summary a second per reason (how many, to whom), and a quiet second
 * ends the summaries. Nothing of a message's content is logged but its `type`: messages carry
 * tenants' bytes.
 */
import type { ActorSystem, DeadLetter, DeadLetterReason, SupervisorRestart } from '../actors/index.js'
import { ErrorCodes, isWarrenError } from '../errors.js'
import type { Logger } from 'pino'
import { errorField } from './error-field.js'

export const DeadLetterLogDefaults = {
  /** One summary per reason per this long, at most. */
  windowMs: 1000,
  /** Recipients a summary names (the rest are only counted). */
  maxRecipients: 5
}

/** The listeners attached to one system; `close` takes them off and logs what is still counted. */
export interface SystemWatch {
  close (): void
}

/** How loud each reason is: a full mailbox is an operator's matter; a letter to an actor that ended is routine. */
const DEAD_LETTER_LEVEL: Record<DeadLetterReason, 'warn' | 'debug'> = {
  overloaded: 'warn',
  dropped: 'warn',
  stopped: 'debug',
  'no-such-actor': 'debug'
}

/**
 * The ids an address holds, as log fields: `cp/shard-2` is shard 2, `<node>/sb-<id>` sandbox
 * `<id>` on node `<node>`, any other `<system>/…` the system (the control plane `cp`, or a node).
 */
export function idsOfAddress (address: string): Record<string, string | number> {
  const slash = address.indexOf('/')
  const system = slash < 0 ? address : address.slice(0, slash)
  const name = slash < 0 ? '' : address.slice(slash + 1)
  const shard = /^shard-(\d+)$/.exec(name)
  if (shard !== null) return { shard: Number(shard[1]) }
  if (name.startsWith('sb-')) return { node: system, sandbox: name.slice(3) }
  return system === 'cp' ? {} : { node: system }
}

function messageType (message: unknown): string | undefined {
  const t = (message as { type?: unknown } | null)?.type
  return typeof t === 'string' ? t.slice(0, 64) : undefined
}

interface Window { count: number, recipients: Set<string>, timer: NodeJS.Timeout }

/**
 * Attaches the log's listeners to a system.
 * @param system the actor system (the control plane's, a node's)
 * @param log where the lines go (bind the system's own ids first, e.g. `{ node }`)
 * @param windowMs one dead-letter summary per reason per this long (tests shorten it)
 * @param told true for an actor whose failure its caller is told of some other way (a failed
 *   listen is the command's own error): its failures and restarts are not logged again
 */
export function watchSystem (system: ActorSystem, log: Logger, windowMs = DeadLetterLogDefaults.windowMs, told?: (address: string) => boolean): SystemWatch {
  const windows = new Map<DeadLetterReason, Window>()

  const onFailed = ({ address, error }: { address: string, error: unknown }): void => {
    if (told?.(address) === true) return
    if (isWarrenError(error, ErrorCodes.SUPERVISOR_INTENSITY)) {
      log.error({ actor: address, ...idsOfAddress(address), err: error }, 'supervisor gave up: its children failed too often')
      return
    }
    log.error({ actor: address, ...idsOfAddress(address), err: errorField(error) }, 'actor failed')
  }
  const onRestart = (e: SupervisorRestart): void => {
    if (told?.(e.child.includes('/') ? e.child : `${e.supervisor.split('/')[0]}/${e.child}`) === true) return
    log.warn({ supervisor: e.supervisor, child: e.child, cause: e.reason, ...(e.delayMs !== undefined ? { delayMs: e.delayMs } : {}), ...idsOfAddress(e.child.includes('/') ? e.child : `${e.supervisor.split('/')[0]}/${e.child}`) },
      e.delayMs !== undefined ? 'supervisor restarts a child after a backoff' : 'supervisor restarted a child')
  }
  const summarize = (reason: DeadLetterReason): void => {
    const w = windows.get(reason)
    if (w === undefined) return
    if (w.count === 0) { windows.delete(reason); return }
    log[DEAD_LETTER_LEVEL[reason]]({ reason, count: w.count, windowMs, recipients: [...w.recipients] }, `${w.count} more dead letters (${reason})`)
    // Still flooding: the next summary in a window's time; a quiet window ends them.
    windows.set(reason, open(reason))
  }
  const open = (reason: DeadLetterReason): Window => {
    const timer = setTimeout(() => summarize(reason), windowMs)
    timer.unref()
    return { count: 0, recipients: new Set(), timer }
  }
  const onDeadLetter = (d: DeadLetter): void => {
    const w = windows.get(d.reason)
    if (w !== undefined) {
      w.count++
      if (w.recipients.size < DeadLetterLogDefaults.maxRecipients) w.recipients.add(d.recipient)
      return
    }
    const type = messageType(d.message)
    log[DEAD_LETTER_LEVEL[d.reason]]({ reason: d.reason, recipient: d.recipient, ...idsOfAddress(d.recipient), ...(type !== undefined ? { messageType: type } : {}) }, `dead letter (${d.reason})`)
    windows.set(d.reason, open(d.reason))
  }

  system.on('actorFailed', onFailed)
  system.on('supervisorRestart', onRestart)
  system.on('deadLetter', onDeadLetter)
  return {
    close () {
      system.off('actorFailed', onFailed)
      system.off('supervisorRestart', onRestart)
      system.off('deadLetter', onDeadLetter)
      for (const [reason, w] of windows) {
        clearTimeout(w.timer)
        if (w.count > 0) log[DEAD_LETTER_LEVEL[reason]]({ reason, count: w.count, recipients: [...w.recipients] }, `${w.count} more dead letters (${reason})`)
      }
      windows.clear()
    }
  }
}
