/** The layer server: on-demand layers served by a process of their own. Public face of src/images/layer-server. */
export { startLayerService, type LayerService, type LayerServiceOptions } from './client.js'
export { startLayerServer, type LayerServer } from './server.js'
export { LayerServerDefaults, type LayerServerConfig } from './protocol.js'
export { shareLayerService } from './share.js'
