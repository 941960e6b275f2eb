/**
 * An actor is a behaviour plus private state, reached only through its Ref. Subclass `Actor`,
 * implement `receive`, and spawn it with `system.spawn(() => new MyActor())`.
 *
 * The kernel guarantees that at most one of an actor's methods runs at a time: while a
 * `receive` that returned a promise is pending, the actor handles nothing else, so its state
 * needs no locks.
 */
import type { ActorContext } from './context.js'
import type { ExitReason, Ref } from './types.js'

export abstract class Actor<M = unknown> {
  /** Set by the kernel before `preStart`; the actor's window on the system. */
  ctx!: ActorContext<M>

  /** This actor's own Ref. */
  get self (): Ref<M> { return this.ctx.self }

  /**
   * Handles one user message. The return value (awaited, if a promise) is the reply when the
   * message was asked. Throwing a `WarrenError` while answering an ask rejects that ask and the
   * actor lives on; any other throw fails the actor and its supervisor decides what follows.
   */
  abstract receive (message: M): unknown

  /** Runs before the first message; messages wait until it settles. Throwing fails the actor. */
  preStart? (): unknown

  /** Runs once however the actor ends (stopped, failed or killed): release resources here. */
  postStop? (reason: ExitReason): unknown

  /** A watched actor ended (see `ctx.watch`). */
  onTerminated? (ref: Ref, reason: ExitReason): unknown

  /** One of this actor's children ended. Supervisors restart children from here. */
  onChildExit? (ref: Ref, reason: ExitReason): unknown

  /**
   * Stops this actor's children when it is stopping, before `postStop`. Without it the kernel
   * stops them newest first with the system's stop timeout; supervisors use it to honour each
   * child's own shutdown setting. Children still alive afterwards get the default treatment.
   */
  stopChildren? (reason: ExitReason): unknown
}

/** A function that makes a fresh actor: called again on every restart. */
export type ActorFactory<M = unknown> = () => Actor<M>
