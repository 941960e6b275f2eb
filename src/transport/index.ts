/**
 * The transport's public face: msgpack frames over WebSocket links, with auth, heartbeats,
 * reconnect and resume, request/reply, credit-flow streams, and remote actor refs. Other
 * folders import from here only.
 */
export { resolveLinkOptions, transportDefaults, type LinkOptions, type LinkOptionsInput, type ReconnectOptions } from './defaults.js'
export { createCodec, type Codec, type DecodedMessage } from './codec.js'
export { createTokenBucket, type TokenBucket } from './token-bucket.js'
export { FrameKind, parseFrame, FrameProblem, PROTOCOL_VERSION, type Frame, type FrameKindName, type StreamPosition } from './frames.js'
export type { Link, LinkEvents, LinkHandler, LinkState } from './link.js'
export type { StreamWriter, StreamWriterEvents } from './stream-writer.js'
export type { StreamReader } from './stream-reader.js'
export { createLinkServer, CLOSE_TRY_AGAIN, CLOSE_UNAUTHENTICATED, type LinkServer, type LinkServerEvents, type LinkServerOptions } from './server.js'
export { createLinkClient, type LinkClient, type LinkClientOptions } from './client.js'
export { createRemoteRef, exposeSystem, isStreamReader, routeRemote, type ExposeOptions, type RemoteRef, type SystemHandler } from './remote.js'
export { createPortServer, fetchTrusting, loadCa, loadServerTls, plainAtTlsPort, rawSocket, servesTls, tlsRefusal, trustList, TLS_REQUIRED_HEADER, type CaInput, type TlsServerConfig } from './tls.js'
