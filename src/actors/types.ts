/** The shapes shared by the kernel's files and its users. */
import type { WarrenError } from '../errors.js'

/** Options for `ask`. */
export interface AskOptions {
  /** How long to wait for the reply; default `ActorDefaults.askTimeoutMs`; `Infinity` never times out. */
  timeoutMs?: number
}

/**
 * The only way to reach an actor, local or remote. A Ref stays valid after its actor ends:
 * messages to it become dead letters and asks reject, nothing throws.
 */
export interface Ref<M = unknown> {
  /** `${systemName}/${name}`: unique in a cluster, stable for the actor's life. */
  readonly address: string
  /**
   * Sends a message without waiting. Returns false when the message was not queued (the
   * mailbox rejected or dropped it, or the actor is gone); it is then counted as a dead letter.
   */
  tell (message: M, sender?: Ref): boolean
  /** Sends a message and waits for the reply (the value the actor's `receive` returned). */
  ask<R = unknown> (message: M, options?: AskOptions): Promise<R>
}

/** What a full mailbox does with one more message. */
export type OverflowPolicy = 'reject' | 'drop-oldest' | 'drop-newest'

/** Why an actor ended. Anything but `normal` and `shutdown` is abnormal. */
export type ExitReason = 'normal' | 'shutdown' | 'killed' | 'noproc' | ActorFailure

/** An actor ended because its behaviour threw (or it called `ctx.fail`). */
export interface ActorFailure {
  readonly failed: true
  readonly error: unknown
}

/** True when `reason` is abnormal: supervisors restart `transient` children only for these. */
export function isAbnormal (reason: ExitReason): boolean {
  return reason !== 'normal' && reason !== 'shutdown'
}

/** True when the actor failed (threw), as opposed to being stopped or killed. */
export function isFailure (reason: ExitReason): reason is ActorFailure {
  return typeof reason === 'object' && reason.failed
}

/** Describes a reason for logs and for the wire. */
export function describeReason (reason: ExitReason): string {
  if (!isFailure(reason)) return reason
  const e = reason.error
  return e instanceof Error ? `failed: ${(e as Partial<WarrenError>).code ? (e as WarrenError).code + ': ' : ''}${e.message}` : `failed: ${String(e)}`
}

/** Where the answer to an ask goes: a promise in this process, or a reply frame to another. */
export interface ReplyTo {
  resolve (value: unknown): void
  reject (error: unknown): void
}

/** One queued user message. */
export interface Envelope {
  message: unknown
  sender: Ref | undefined
  reply: ReplyTo | undefined
}

/** Mailbox settings of one actor. */
export interface MailboxOptions {
  /** User messages held before `overflow` applies. */
  capacity?: number
  overflow?: OverflowPolicy
}

/** Options for `spawn`. */
export interface SpawnOptions {
  /** A name unique in this system; the address becomes `${system}/${name}`. Default: generated. */
  name?: string
  mailbox?: MailboxOptions
  /** Messages handled per turn before yielding to other actors. */
  throughput?: number
}

/** Why a message did not reach its actor. */
export type DeadLetterReason = 'overloaded' | 'dropped' | 'stopped' | 'no-such-actor'

/** A message that could not be delivered, as the system reports it. */
export interface DeadLetter {
  recipient: string
  message: unknown
  reason: DeadLetterReason
}

/**
 * A supervisor restarted a child (or armed its backoff timer for one): what the system emits as
 * `supervisorRestart`. A supervisor that gives up instead fails with
 * `WARREN_ERR_SUPERVISOR_INTENSITY`, which is its `actorFailed`.
 */
export interface SupervisorRestart {
  /** The supervisor's address. */
  supervisor: string
  /** The child's id (a dynamic supervisor's children: the address it had). */
  child: string
  /** Why the child ended (`describeReason`). */
  reason: string
  /** Set when the restart waits for a backoff: how long. */
  delayMs?: number
}
