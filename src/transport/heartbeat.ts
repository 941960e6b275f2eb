/**
 * Dead-peer detection. A TCP connection whose peer vanished (power loss, a paused process, a
 * black-holed route) looks open forever; only silence tells. Every tick, if nothing arrived
 * since the previous tick a ping frame goes out; the peer answers with a pong. Once nothing at
 * all was heard for `timeoutMs` the peer is declared dead. Any incoming message counts as a
 * sign of life, so a busy link sends no pings at all.
 *
 * Detection takes between `timeoutMs` and `timeoutMs + intervalMs`.
 */

export interface HeartbeatOptions {
  intervalMs: number
  timeoutMs: number
  /** Sends a ping frame. */
  ping: () => void
  /** The peer was silent for `timeoutMs`. Called once. */
  dead: (silentMs: number) => void
}

export interface Heartbeat {
  /** Records a sign of life. Called per incoming message, so it only sets a flag. */
  seen (): void
  /** Starts the timer (counting from now). */
  start (): void
  /** Stops the timer. */
  stop (): void
}

/**
 * Creates a heartbeat for one socket.
 * @param options tick and timeout, and what to do on each
 */
export function createHeartbeat (options: HeartbeatOptions): Heartbeat {
  let timer: NodeJS.Timeout | null = null
  let lastHeard = 0
  let heardSinceTick = false

  const tick = (): void => {
    const now = Date.now()
    if (heardSinceTick) {
      heardSinceTick = false
      lastHeard = now
      return
    }
    const silent = now - lastHeard
    if (silent >= options.timeoutMs) {
      stop()
      options.dead(silent)
      return
    }
    options.ping()
  }

  function stop (): void {
    if (timer !== null) clearInterval(timer)
    timer = null
  }

  return {
    seen () { heardSinceTick = true },
    start () {
      stop()
      lastHeard = Date.now()
      heardSinceTick = false
      // unref: a heartbeat alone must not keep a process alive; the socket does that.
      timer = setInterval(tick, options.intervalMs).unref()
    },
    stop
  }
}
