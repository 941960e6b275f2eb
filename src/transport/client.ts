/**
 * The dialing side: a link that connects, authenticates, and reconnects with exponential
 * backoff when its socket drops, resuming the same session so streams continue where the
 * consumer left off. A refused token closes the link for good (retrying cannot fix it); so do
 * `maxAttempts` consecutive failures and a `bye` from the server.
 */
import { WebSocket } from 'ws'
import { createError, ErrorCodes, fromWireError, type WarrenError } from '../errors.js'
import { createBackoff, type Backoff } from '../supervisors/index.js'
import { createCodec } from './codec.js'
import { resolveLinkOptions, type LinkOptionsInput } from './defaults.js'
import { FrameProblem, parseFrame, PROTOCOL_VERSION, type Frame } from './frames.js'
import { LinkCore, type Link, type LinkHandler } from './link.js'
import { plainAtTlsPort, tlsRefusal, TLS_REQUIRED_HEADER, trustList } from './tls.js'

export interface LinkClientOptions extends LinkOptionsInput {
  /** `ws://host:port/path` of a link server. */
  url: string
  /** Presented in the auth frame of every socket. */
  token: string
  /** What to do with the server's tells, requests and streams. */
  handler?: LinkHandler
  /** A `wss://` server's CA (PEM), trusted beside the system's roots. */
  ca?: string
}

export interface LinkClient extends Link {
  /**
   * Resolves once the first handshake succeeded. Rejects when the link closes first, e.g. with
   * WARREN_ERR_UNAUTHENTICATED. Frames sent before that are queued, not lost.
   */
  connect (): Promise<void>
}

class ClientLink extends LinkCore implements LinkClient {
  private readonly backoff: Backoff
  private dialing: WebSocket | null = null
  private retryTimer: NodeJS.Timeout | null = null
  private readonly ready: Promise<void>
  private settleReady!: (err?: WarrenError) => void

  private readonly ca: string[] | undefined

  constructor (private readonly url: string, private readonly token: string, input: LinkOptionsInput, handler: LinkHandler | undefined, ca: string | undefined) {
    const o = resolveLinkOptions(input)
    // The hooks run only after construction, when `self` is set.
    let self!: ClientLink
    super(o, createCodec(o.maxFrameBytes), {
      detached: () => self.retry(),
      closed: (reason) => self.onClosed(reason)
    }, { sessionId: '', principal: undefined, handler })
    self = this
    this.ca = ca === undefined ? undefined : trustList(ca)
    const r = o.reconnect
    // Success resets the sequence (reset() on open), not a quiet period.
    this.backoff = createBackoff({ minMs: r.minDelayMs, maxMs: r.maxDelayMs, factor: r.factor, jitter: r.jitter, resetAfterMs: Infinity })
    this.ready = new Promise<void>((resolve, reject) => {
      this.settleReady = (err) => { if (err === undefined) resolve(); else reject(err) }
    })
    // A caller that never awaits connect() must not get an unhandled rejection.
    this.ready.catch(() => {})
    this.dial()
  }

  connect (): Promise<void> {
    return this.ready
  }

  private dial (): void {
    this.retryTimer = null
    if (this.state === 'closed') return
    const ws = new WebSocket(this.url, {
      perMessageDeflate: false,
      maxPayload: this.options.maxMessageBytes,
      handshakeTimeout: this.options.authTimeoutMs,
      ...(this.ca !== undefined ? { ca: this.ca } : {})
    })
    this.dialing = ws
    let failure: WarrenError | undefined
    const timer = setTimeout(() => {
      failure = createError(ErrorCodes.TIMEOUT, `no welcome within ${this.options.authTimeoutMs} ms`)
      ws.terminate()
    }, this.options.authTimeoutMs)
    const onClose = (code: number): void => {
      clearTimeout(timer)
      if (this.dialing === ws) this.dialing = null
      this.retry(failure ?? createError(ErrorCodes.CONNECTION_CLOSED, `handshake socket closed (code ${code})`, { code }))
    }
    const onMessage = (data: Buffer, isBinary: boolean): void => {
      ws.off('message', onMessage)
      let frame: Frame | FrameProblem | undefined
      try {
        const { values } = isBinary ? this.codec.decode(data) : { values: [] as unknown[] }
        frame = values.length === 1 ? parseFrame(values[0]) : undefined
      } catch {
        frame = undefined
      }
      if (frame !== undefined && !(frame instanceof FrameProblem) && frame.k === 'error') {
        const err = fromWireError(frame.err)
        // Refusals that another attempt cannot change: the link closes with them for good.
        if (err.code === ErrorCodes.UNAUTHENTICATED || err.code === ErrorCodes.PROTOCOL_VERSION) {
          clearTimeout(timer)
          ws.off('close', onClose)
          this.dialing = null
          ws.close()
          this.shutdown(err, false)
          return
        }
      }
      if (frame === undefined || frame instanceof FrameProblem || frame.k !== 'welcome') {
        failure = createError(ErrorCodes.PROTOCOL_VIOLATION, 'the server did not answer auth with welcome')
        ws.terminate()
        return
      }
      clearTimeout(timer)
      ws.off('close', onClose)
      this.dialing = null
      this.backoff.reset()
      if (frame.resumed && frame.session === this.sessionId) {
        this.attach(ws, true, true)
        this.resumeStreams(frame.streams)
        this.pushQuietly({ k: 'resume', streams: this.positions() })
      } else {
        if (this.sessionId !== '') this.resetSession(frame.session)
        this.sessionId = frame.session
        this.attach(ws, false, false)
        // Writers opened while there was no socket open now, on the new session.
        this.resumeStreams([])
      }
      this.settleReady()
    }
    // A certificate TLS refused, or a plain client at a TLS-only port: no retry can change that.
    const forGood = (err: WarrenError): void => {
      clearTimeout(timer)
      ws.off('close', onClose)
      this.dialing = null
      ws.terminate()
      this.shutdown(err, false)
    }
    ws.on('error', (err) => {
      const refused = tlsRefusal(err, this.url)
      if (refused !== undefined && this.dialing === ws) forGood(refused)
    })
    ws.on('unexpected-response', (_req, res) => {
      res.resume()
      if (res.headers[TLS_REQUIRED_HEADER] !== undefined) forGood(plainAtTlsPort(this.url))
      else ws.terminate()
    })
    ws.on('close', onClose)
    ws.on('message', onMessage)
    ws.on('open', () => {
      const auth: Frame = this.sessionId === ''
        ? { k: 'auth', token: this.token, v: PROTOCOL_VERSION }
        : { k: 'auth', token: this.token, session: this.sessionId, v: PROTOCOL_VERSION }
      ws.send(this.codec.encode(auth))
    })
  }

  /** Schedules the next attempt, or gives up after `maxAttempts` consecutive failures. */
  private retry (reason?: WarrenError): void {
    if (this.state === 'closed' || this.retryTimer !== null || this.dialing !== null) return
    const { maxAttempts } = this.options.reconnect
    if (this.backoff.attempts >= maxAttempts) {
      this.shutdown(createError(ErrorCodes.CONNECTION_CLOSED, `gave up after ${maxAttempts} reconnect attempts${reason === undefined ? '' : `: ${reason.message}`}`), false)
      return
    }
    const delayMs = this.backoff.next()
    this.emit('reconnect', { attempt: this.backoff.attempts, delayMs })
    this.retryTimer = setTimeout(() => this.dial(), delayMs)
  }

  private onClosed (reason: WarrenError | undefined): void {
    if (this.retryTimer !== null) clearTimeout(this.retryTimer)
    this.retryTimer = null
    if (this.dialing !== null) {
      // terminate() emits 'close' later; the handshake's close handler sees state 'closed' and stops there.
      this.dialing.terminate()
      this.dialing = null
    }
    this.settleReady(reason ?? createError(ErrorCodes.CONNECTION_CLOSED, 'the link closed before it connected'))
  }
}

/**
 * Creates a client link and starts connecting at once.
 * @param options `url`, `token`, the handler, reconnect backoff and any link option
 * @throws WARREN_ERR_INVALID_ARGUMENT on inconsistent options
 */
export function createLinkClient (options: LinkClientOptions): LinkClient {
  const { url, token, handler, ca, ...rest } = options
  return new ClientLink(url, token, rest, handler, ca)
}
