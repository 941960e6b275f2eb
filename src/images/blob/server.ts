/**
 * A standalone blob server: node:http around the blob handler. The control plane may instead
 * mount `createBlobHandler` on its own server.
 */
import { EventEmitter } from 'node:events'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { BlobDefaults } from './defaults.js'
import { createBlobHandler, type BlobHandlerOptions, type BlobRequestInfo, type BlobResponseInfo } from './handler.js'

export interface BlobServerOptions extends Omit<BlobHandlerOptions, 'onRequest' | 'onResponse'> {
  /** Interface to listen on (default `BlobDefaults.server.host`, loopback). */
  host?: string
  /** Port to listen on (default 0: a free one). */
  port?: number
}

export interface BlobServerEvents {
  /** A request arrived (before any check). */
  request: [info: BlobRequestInfo]
  /** A response ended or its client left. */
  response: [info: BlobResponseInfo]
}

export interface BlobServer extends EventEmitter<BlobServerEvents> {
  /** The port listened on (after `listen`). */
  readonly port: number
  /** `http://host:port` (after `listen`): the base URL a layer cache fetches from. */
  readonly url: string
  /**
   * Starts listening.
   * @param port overrides the option (a restarted server can take its old port back)
   * @returns the port
   */
  listen (port?: number): Promise<number>
  /** Stops listening and drops every connection, including responses mid-body. */
  close (): Promise<void>
}

class BlobServerImpl extends EventEmitter<BlobServerEvents> implements BlobServer {
  private readonly http: Server
  private readonly host: string
  private boundPort = 0

  constructor (private readonly options: BlobServerOptions) {
    super()
    this.host = options.host ?? BlobDefaults.server.host
    this.http = createServer(createBlobHandler({
      ...options,
      onRequest: (info) => this.emit('request', info),
      onResponse: (info) => this.emit('response', info)
    }))
  }

  get port (): number { return this.boundPort }

  get url (): string {
    const host = this.host.includes(':') ? `[${this.host}]` : this.host
    return `http://${host}:${this.boundPort}`
  }

  listen (port?: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.http.once('error', reject)
      this.http.listen(port ?? this.options.port ?? BlobDefaults.server.port, this.host, () => {
        this.http.off('error', reject)
        this.boundPort = (this.http.address() as AddressInfo).port
        resolve(this.boundPort)
      })
    })
  }

  close (): Promise<void> {
    return new Promise((resolve) => {
      if (!this.http.listening) { resolve(); return }
      this.http.close(() => resolve())
      this.http.closeAllConnections()
    })
  }
}

/**
 * Creates a blob server over a store directory (call `listen`).
 * @example createBlobServer({ root, authorize: tokenCheck(joinToken) })
 */
export function createBlobServer (options: BlobServerOptions): BlobServer {
  return new BlobServerImpl(options)
}
