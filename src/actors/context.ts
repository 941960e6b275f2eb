/** What an actor can do to the system from inside its own methods (`this.ctx`). */
import type { ActorFactory } from './actor.js'
import type { ActorSystem } from './system.js'
import type { ExitReason, Ref, ReplyTo, SpawnOptions } from './types.js'

/** How long a stop waits before it kills: a number of ms, or forever. */
export type StopTimeout = number | 'infinity'

export interface ActorContext<M = unknown> {
  /** This actor's Ref. */
  readonly self: Ref<M>
  /** The system the actor lives in. */
  readonly system: ActorSystem
  /** The actor that spawned this one, if any. */
  readonly parent: Ref | undefined
  /** The sender of the message being handled, when it named one. */
  readonly sender: Ref | undefined

  /** Spawns a child: it ends before this actor does, and its end is reported to `onChildExit`. */
  spawn<C> (factory: ActorFactory<C>, options?: SpawnOptions): Ref<C>
  /** This actor's live children, oldest first. */
  children (): Ref[]
  /**
   * Asks to be told (`onTerminated`) when `ref` ends. Idempotent; watching an actor that has
   * already ended delivers `Terminated` with reason `noproc` at once.
   */
  watch (ref: Ref): void
  /** Stops watching `ref`. */
  unwatch (ref: Ref): void
  /** Stops this actor after the current message (reason `normal` unless given). */
  stop (reason?: ExitReason): void
  /** Fails this actor with `error`, as if a message handler had thrown it. */
  fail (error: unknown): void
  /**
   * Stops a child: `0` kills it at once (brutal kill), a number of ms waits that long for a
   * graceful stop and then kills, `infinity` waits as long as it takes.
   */
  stopChild (ref: Ref, timeout: StopTimeout): Promise<void>
  /**
   * Takes over the reply to the message being handled, to answer it later (e.g. when a
   * backend is ready) while the actor goes on handling other messages. For a told message
   * the returned ReplyTo does nothing.
   */
  defer (): ReplyTo
  /**
   * Answers the message being handled with `work`'s outcome once it settles, while the actor
   * goes on with other messages (`defer` plus piping). A rejection is the answer, never a failure.
   */
  answerLater (work: PromiseLike<unknown>): void
  /** Sends `message` to self after `ms` (repeating when asked); a timer with the same key is replaced. */
  setTimer (key: string, ms: number, message: M, options?: { repeat?: boolean }): void
  /** Cancels a timer; no-op when there is none. */
  cancelTimer (key: string): void
}
