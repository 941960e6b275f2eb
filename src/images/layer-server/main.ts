/**
 * The layer server process (started detached by a node: see client.ts). Its configuration,
 * secrets included, comes in the environment, never on the command line where `ps` shows it.
 */
import { LayerServerDefaults, type LayerServerConfig } from './protocol.js'
import { startLayerServer } from './server.js'

const raw = process.env[LayerServerDefaults.envVar]
if (raw === undefined) {
  process.stderr.write(`warren layer-server: ${LayerServerDefaults.envVar} is not set (a node starts this process)\n`)
  process.exit(2)
}
delete process.env[LayerServerDefaults.envVar]
const config = JSON.parse(raw) as LayerServerConfig
try {
  const server = await startLayerServer(config)
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => { void server.close() })
  process.stderr.write(`warren layer-server: serving ${config.mountpoint} on ${config.socketPath} (pid ${process.pid})\n`)
  await server.stopped
  process.exit(0)
} catch (err) {
  process.stderr.write(`warren layer-server: ${(err as Error).message}\n`)
  process.exit(1)
}
