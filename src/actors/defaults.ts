/** Every default of the actor kernel, in one place. */
export const ActorDefaults = {
  /** How long `ask` waits for a reply. */
  askTimeoutMs: 5000,
  /** User messages an actor's mailbox holds before its overflow policy applies. */
  mailboxCapacity: 1000,
  /** What a full mailbox does with one more message. */
  overflow: 'reject' as const,
  /** Messages one actor handles per turn before the scheduler moves on to the next actor. */
  throughput: 64,
  /** Longest the scheduler runs before it yields to the event loop, so I/O keeps flowing. */
  sliceMs: 5,
  /** How long a graceful stop waits for an actor (children and postStop) before killing it. */
  stopTimeoutMs: 5000
}
