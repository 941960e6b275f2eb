/**
 * The long-running commands: `warren up` (control plane and a local node in one process) and
 * `warren node` (a node joining a control plane). Both stop cleanly on SIGINT or SIGTERM.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve as resolvePath } from 'node:path'
import { nanoid } from 'nanoid'
import { ControlPlaneDefaults, defaultNodeId, startControlPlane, startNode, type NodeProcess } from '../cluster/index.js'
import { createError, ErrorCodes } from '../errors.js'
import { configPath, writeConfig } from '../sdk/index.js'
import { loadCa, loadServerTls, type TlsServerConfig } from '../transport/index.js'
import { systemCause } from './failure.js'
import { parseMilliseconds, parseNumber, parsePairs } from './units.js'
import { createLogger, resolveLogLevel, type Logger } from '../log/index.js'

/**
 * The servers' logger: `--log-level`, else WARREN_LOG_LEVEL, else info; JSON lines on stderr,
 * pretty when stderr is a terminal. What the CLI tells its user stays on stdout, as before.
 */
function serverLogger (flag: string | undefined): Logger {
  return createLogger({ level: resolveLogLevel(flag) })
}

function waitForSignal (): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: string): void => { process.off('SIGINT', on); process.off('SIGTERM', on); resolve(sig) }
    process.on('SIGINT', on)
    process.on('SIGTERM', on)
  })
}

/** A node id kept in the data directory, so a restarted node rejoins as itself. */
function persistentNodeId (dataDir: string): string {
  const file = join(dataDir, 'node-id')
  try {
    return readFileSync(file, 'utf8').trim()
  } catch {
    const id = `${defaultNodeId()}-${nanoid(6).replace(/[^a-zA-Z0-9]/g, 'x')}`
    mkdirSync(dataDir, { recursive: true })
    writeFileSync(file, id + '\n')
    return id
  }
}

/** A listen that failed (busy port, foreign address, a privileged port) as INVALID_ARGUMENT naming the address and port. */
function listenRefusal (err: unknown, host: string, port: number): unknown {
  const e = err as NodeJS.ErrnoException
  if (!(err instanceof Error) || (e.code !== 'EADDRINUSE' && e.code !== 'EADDRNOTAVAIL' && e.code !== 'EACCES')) return err
  const field = e.code === 'EADDRNOTAVAIL' ? 'host' : 'port'
  return createError(ErrorCodes.INVALID_ARGUMENT, `cannot listen on ${host} port ${port}: ${systemCause(e)}; choose another with --${field}`, { field, address: host, port, cause: e.code })
}

export interface UpFlags {
  port?: string, host?: string, 'data-dir'?: string, 'functions-dir'?: string, shards?: string, 'no-local-node'?: boolean, 'lazy-layers'?: boolean, 'no-lazy-layers'?: boolean, kernel?: string, 'kernel-modules'?: string,
  'trajectory-retention'?: string, 'rotate-admin-key'?: boolean, 'log-level'?: string, 'metrics-token-file'?: string, 'tls-cert'?: string, 'tls-key'?: string, ca?: string
}

/**
 * `--tls-cert F --tls-key F [--ca F]`: the certificate and key (read and checked before anything
 * starts), and the CA the local node and the config file trust — the certificate itself when no
 * CA is named, right for a self-signed one.
 */
function upTls (flags: UpFlags): { tls: TlsServerConfig, caPath: string, ca: string } | undefined {
  const cert = flags['tls-cert']
  const key = flags['tls-key']
  if (cert === undefined && key === undefined) {
    if (flags.ca !== undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, '--ca goes with --tls-cert and --tls-key', { field: 'ca' })
    return undefined
  }
  if (cert === undefined || key === undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, 'TLS needs both --tls-cert FILE and --tls-key FILE', { field: cert === undefined ? 'tls-cert' : 'tls-key' })
  const tls = loadServerTls(cert, key)
  const caPath = resolvePath(flags.ca ?? cert)
  return { tls, caPath, ca: loadCa(caPath, flags.ca !== undefined ? 'ca' : 'tls-cert') }
}

/**
 * SIGHUP: read the certificate and key again and serve them to new connections (a renewed
 * certificate needs no restart). A file that fails the checks keeps the old one, said on stderr.
 * @returns the function that stops listening
 */
function onReload (cp: { reloadTls: (tls: TlsServerConfig) => Promise<void> }, cert: string, key: string): () => void {
  const on = (): void => {
    Promise.resolve().then(async () => { await cp.reloadTls(loadServerTls(cert, key)) }).then(
      () => process.stderr.write(`warren: reloaded the certificate ${cert}\n`),
      (err: unknown) => process.stderr.write(`warren: kept the old certificate: ${(err as Error).message}\n`))
  }
  process.on('SIGHUP', on)
  return () => { process.off('SIGHUP', on) }
}

/** The node's microvm options from `--kernel` / `--kernel-modules`. */
function kernelOptions (flags: { kernel?: string, 'kernel-modules'?: string }): { microvm?: { kernel: string, kernelModules?: string } } {
  if (flags.kernel === undefined) {
    if (flags['kernel-modules'] !== undefined) throw createError(ErrorCodes.INVALID_ARGUMENT, '--kernel-modules goes with --kernel', { field: 'kernel-modules' })
    return {}
  }
  return { microvm: { kernel: flags.kernel, ...(flags['kernel-modules'] !== undefined ? { kernelModules: flags['kernel-modules'] } : {}) } }
}

/** The token of the config file `warren up` writes, when there is one. */
function configToken (): string | undefined {
  try {
    const t = (JSON.parse(readFileSync(configPath(), 'utf8')) as { token?: unknown }).token
    return typeof t === 'string' ? t : undefined
  } catch {
    return undefined
  }
}

/** `warren up`: prints the URL and an admin token, writes ~/.warren/config.json (0600), runs until a signal. */
export async function up (flags: UpFlags, until: Promise<unknown> = waitForSignal()): Promise<number> {
  const dataDir = flags['data-dir'] ?? join(homedir(), '.warren', 'data')
  const port = flags.port !== undefined ? parseNumber(flags.port, '--port', { whole: true, max: 65535 }) : ControlPlaneDefaults.port
  const shards = flags.shards !== undefined ? parseNumber(flags.shards, '--shards', { whole: true, min: 1, max: ControlPlaneDefaults.maxShards }) : undefined
  const host = flags.host ?? ControlPlaneDefaults.host
  const retention = flags['trajectory-retention'] !== undefined ? parseMilliseconds(flags['trajectory-retention'], 'trajectory-retention') : undefined
  const logger = serverLogger(flags['log-level'])
  const metricsToken = flags['metrics-token-file'] !== undefined ? readMetricsToken(flags['metrics-token-file']) : undefined
  const tls = upTls(flags)
  // A deployment's join token comes from its secret (environment), never the command line.
  const joinToken = process.env.WARREN_JOIN_TOKEN !== undefined && process.env.WARREN_JOIN_TOKEN !== '' ? process.env.WARREN_JOIN_TOKEN : undefined
  const cp = await startControlPlane({
    ...(joinToken !== undefined ? { joinToken } : {}),
    ...(tls !== undefined ? { tls: tls.tls } : {}),
    port,
    host,
    dataDir,
    logger,
    ...(shards !== undefined ? { shards } : {}),
    ...(retention !== undefined ? { trajectoryRetentionMs: retention } : {}),
    ...(metricsToken !== undefined ? { metricsToken } : {})
  }).catch((err: unknown) => { throw listenRefusal(err, host, port) })
  // The local node and this machine's clients dial loopback when the port listens on every
  // address (a certificate names addresses one can dial, never 0.0.0.0).
  const localUrl = cp.url.replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//[::1]:')
  let node: NodeProcess | undefined
  try {
    if (flags['no-local-node'] !== true) {
      node = await startNode({ url: localUrl, joinToken: cp.joinToken, ...(tls !== undefined ? { ca: tls.ca } : {}), nodeId: persistentNodeId(dataDir), functionsDir: flags['functions-dir'] ?? null, dataDir, lazyLayers: flags['no-lazy-layers'] !== true, logger, ...kernelOptions(flags) })
    }
    // The same admin key across restarts: the one the config file holds, when it still is the
    // admin key. A new one (the first, or rotated) is written to the config before it is committed.
    let written: string | undefined
    // A deployment's admin key comes from its secret too, when it declares one.
    const declared = process.env.WARREN_ADMIN_KEY !== undefined && process.env.WARREN_ADMIN_KEY !== '' ? process.env.WARREN_ADMIN_KEY : undefined
    // Read once: the processes this one starts (the layer server) inherit no admin key.
    delete process.env.WARREN_ADMIN_KEY
    const admin = await cp.adminKey({
      rotate: flags['rotate-admin-key'] === true,
      ...(declared !== undefined ? { declared } : {}),
      ...(configToken() !== undefined ? { candidate: configToken()! } : {}),
      persist: (token) => { written = writeConfig({ url: localUrl, token, ...(tls !== undefined ? { ca: tls.caPath } : {}) }) }
    })
    const token = admin.token
    if (token !== undefined && written === undefined) written = writeConfig({ url: localUrl, token, ...(tls !== undefined ? { ca: tls.caPath } : {}) })
    process.stdout.write([
      node !== undefined ? `warren is up: control plane and node ${node.nodeId} in one process` : 'warren is up: control plane only (nodes join with warren node)',
      `  url:        ${cp.url}`,
      `  page:       ${cp.url.replace(/^ws/, 'http')}/ui/   (log in with the token)`,
      token !== undefined
        ? `  token:      ${token}${admin.how === 'rotated' ? '   (a new admin key: the old one is revoked)' : ''}`
        : `  token:      (the admin key is not the one in ${configPath()}: it works for whoever holds it; lost? warren up --rotate-admin-key)`,
      `  join token: ${cp.joinToken}   (warren node --join ${cp.url} --token …${tls !== undefined ? ` --ca ${tls.caPath}` : ''})`,
      written !== undefined ? `  config:     ${written}` : '  config:     (not written: no admin key to put in it)',
      'Ctrl-C stops it.', ''
    ].join('\n'))
    const reload = tls !== undefined ? onReload(cp, flags['tls-cert']!, flags['tls-key']!) : undefined
    try { await until } finally { reload?.() }
    process.stdout.write('warren: stopping\n')
  } finally {
    await node?.close()
    await cp.close()
  }
  return 0
}

export interface NodeFlags { join?: string, token?: string, ca?: string, 'node-id'?: string, 'data-dir'?: string, 'functions-dir'?: string, 'lazy-layers'?: boolean, 'no-lazy-layers'?: boolean, 'egress-host'?: string[], kernel?: string, 'kernel-modules'?: string, 'log-level'?: string }

/**
 * The metrics token from its file (a file, not the command line, where `ps` shows it to every
 * user of the machine): its first line, 16-4096 characters.
 * @throws WARREN_ERR_INVALID_ARGUMENT naming `metrics-token-file` when it cannot be read or is not such a line
 */
export function readMetricsToken (file: string): string {
  let token: string
  try {
    token = readFileSync(file, 'utf8').split('\n')[0]!.trim()
  } catch (err) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, `--metrics-token-file ${file} cannot be read: ${(err as Error).message}`, { field: 'metrics-token-file' })
  }
  if (token.length < 16 || token.length > 4096 || /\s/.test(token)) {
    throw createError(ErrorCodes.INVALID_ARGUMENT, '--metrics-token-file must hold one token of 16-4096 characters without spaces', { field: 'metrics-token-file' })
  }
  return token
}

/** `warren node --join URL --token T`: joins and runs until a signal. */
export async function node (flags: NodeFlags, until: Promise<unknown> = waitForSignal()): Promise<number> {
  // The token may come from the environment (a systemd EnvironmentFile, a Kubernetes Secret): not on the command line, where ps shows it.
  const token = flags.token ?? process.env.WARREN_JOIN_TOKEN
  if (flags.join === undefined || token === undefined || token === '') throw createError(ErrorCodes.INVALID_ARGUMENT, 'usage: warren node --join URL --token JOIN_TOKEN [--ca FILE] [--node-id ID]', { field: flags.join === undefined ? 'join' : 'token' })
  if (flags.ca !== undefined && !flags.join.startsWith('wss:')) throw createError(ErrorCodes.INVALID_ARGUMENT, `--ca verifies a wss:// control plane; ${flags.join} is not one`, { field: 'ca' })
  const caFile = flags.ca ?? (flags.join.startsWith('wss:') && process.env.WARREN_CA !== '' ? process.env.WARREN_CA : undefined)
  const ca = caFile !== undefined ? loadCa(caFile) : undefined
  const dataDir = flags['data-dir'] ?? join(homedir(), '.warren', 'node')
  const logger = serverLogger(flags['log-level'])
  const n = await startNode({
    logger,
    url: flags.join,
    joinToken: token,
    ...(ca !== undefined ? { ca } : {}),
    nodeId: flags['node-id'] ?? persistentNodeId(dataDir),
    functionsDir: flags['functions-dir'] ?? null,
    dataDir,
    lazyLayers: flags['no-lazy-layers'] !== true,
    ...kernelOptions(flags),
    ...(flags['egress-host'] !== undefined ? { egress: { hosts: parsePairs(flags['egress-host'], 'egress-host', 'name=address:port') ?? {} } } : {})
  })
  process.stdout.write(`warren node ${n.nodeId} joined ${flags.join}\n`)
  try { await until } finally { await n.close() }
  return 0
}

export { configPath }
