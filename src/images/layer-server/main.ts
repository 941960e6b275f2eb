/**
 * The layer server process (started detached by a node: see client.ts). Its configuration,
 * secrets included, comes in the environment, never on the command line where `ps` shows it.
 */
import { createLogger, errorField, isLogLevel, LogDefaults } from '../../log/index.js'
import { LayerServerDefaults, type LayerServerConfig } from './protocol.js'
import { startLayerServer } from './server.js'

// Its stderr is its log file (the node opens it): JSON lines, at the level the node's environment names.
const envLevel = process.env[LogDefaults.envVar]
const log = createLogger({ level: isLogLevel(envLevel) ? envLevel : 'info', bindings: { part: 'layer-server' } })

const raw = process.env[LayerServerDefaults.envVar]
if (raw === undefined) {
  log.error(`${LayerServerDefaults.envVar} is not set (a node starts this process)`)
  process.exit(2)
}
delete process.env[LayerServerDefaults.envVar]
const config = JSON.parse(raw) as LayerServerConfig
try {
  const server = await startLayerServer(config, log)
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => { void server.close() })
  log.info({ mountpoint: config.mountpoint, socket: config.socketPath }, 'layer server serving')
  await server.stopped
  process.exit(0)
} catch (err) {
  log.error({ err: errorField(err) }, 'layer server failed')
  process.exit(1)
}
