/** The actor kernel's public face. Knows nothing of sandboxes. */
export { Actor, type ActorFactory } from './actor.js'
export { systemClock, type Clock, type TimerHandle } from './clock.js'
export type { ActorContext, StopTimeout } from './context.js'
export { ActorDefaults } from './defaults.js'
export { ActorSystem, type ActorSystemOptions, type MailboxDepth, type RemoteRouter } from './system.js'
export {
  describeReason, isAbnormal, isFailure,
  type ActorFailure, type AskOptions, type DeadLetter, type DeadLetterReason, type Envelope,
  type ExitReason, type MailboxOptions, type OverflowPolicy, type Ref, type ReplyTo, type SpawnOptions, type SupervisorRestart
} from './types.js'
