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
import { createLogWindows } from './log-window.js'
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

/**
 * Attaches the log's listeners to a system.
 * @param system the actor system (the control plane's, a node's)
 * @param log where the lines go (bind the system's own ids first, e.g. `{ node }`)
 * @param windowMs one dead-letter summary per reason per this long (tests shorten it)
 * @param told true for an actor whose failure its caller is told of some other way (a failed
 *   listen is the command's own error): its failures and restarts are not logged again
 */
export function watchSystem (system: ActorSystem, log: Logger, windowMs = DeadLetterLogDefaults.windowMs, told?: (address: string) => boolean): SystemWatch {

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
  const deadLetters = createLogWindows<DeadLetterReason, DeadLetter>(windowMs, {
    first: (reason, d) => {
      const type = messageType(d.message)
      log[DEAD_LETTER_LEVEL[reason]]({ reason, recipient: d.recipient, ...idsOfAddress(d.recipient), ...(type !== undefined ? { messageType: type } : {}) }, `dead letter (${reason})`)
    },
    summary: (reason, count, recipients) => log[DEAD_LETTER_LEVEL[reason]]({ reason, count, windowMs, recipients }, `${count} more dead letters (${reason})`)
  }, DeadLetterLogDefaults.maxRecipients)
  const onDeadLetter = (d: DeadLetter): void => deadLetters.note(d.reason, d, d.recipient)

  system.on('actorFailed', onFailed)
  system.on('supervisorRestart', onRestart)
  system.on('deadLetter', onDeadLetter)
  return {
    close () {
      system.off('actorFailed', onFailed)
      system.off('supervisorRestart', onRestart)
      system.off('deadLetter', onDeadLetter)
      deadLetters.close()
    }
  }
}
