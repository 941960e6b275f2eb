/**
 * What a backend tells about its sandboxes as it happens (Backend.onGone, Backend.onEgress):
 * one listener per sandbox for its end by itself, any number for its egress connections. Shared
 * by the backends whose sandboxes run an agent (container, microvm).
 */
import type { EgressAsk } from './container/egress.js'
import type { EgressEvent, GoneListener } from './types.js'

export interface SandboxEvents {
  /** Tells the sandbox's gone listener, once, why it ended by itself. */
  gone (id: string, message: string, reason?: 'oom'): void
  /**
   * Registers the gone listener of `id`; when it `endedAlready`, the listener hears `message` at
   * once (a sandbox may end before anyone listens). Returns the unsubscribe.
   */
  onGone (id: string, listener: GoneListener, endedAlready: boolean, message: string): () => void
  /** What the sandbox's egress proxy calls for each connection asked for. */
  egressOf (id: string): (ask: EgressAsk) => void
  /** Adds an egress listener of `id`. Returns the unsubscribe. */
  onEgress (id: string, listener: (event: EgressEvent) => void): () => void
  /** The sandbox was killed: nobody hears of it any more. */
  forget (id: string): void
}

export function createSandboxEvents (): SandboxEvents {
  const goneListeners = new Map<string, GoneListener>()
  const egressListeners = new Map<string, Set<(event: EgressEvent) => void>>()
  const gone = (id: string, message: string, reason?: 'oom'): void => {
    const listener = goneListeners.get(id)
    goneListeners.delete(id)
    listener?.(message, reason)
  }
  return {
    gone,
    onGone (id, listener, endedAlready, message) {
      goneListeners.set(id, listener)
      if (endedAlready) queueMicrotask(() => gone(id, message))
      return () => { if (goneListeners.get(id) === listener) goneListeners.delete(id) }
    },
    egressOf: (id) => (ask) => {
      for (const listener of egressListeners.get(id) ?? []) listener({ ...ask, at: Date.now() })
    },
    onEgress (id, listener) {
      let set = egressListeners.get(id)
      if (set === undefined) egressListeners.set(id, set = new Set())
      set.add(listener)
      return () => {
        set.delete(listener)
        if (set.size === 0 && egressListeners.get(id) === set) egressListeners.delete(id)
      }
    },
    forget (id) {
      goneListeners.delete(id)
      egressListeners.delete(id)
    }
  }
}
