/** The control plane: the public face of src/cluster/control. */
export { CONTROL_PLANE, ControlPlaneDefaults, startControlPlane, type ControlPlane, type ControlPlaneOptions } from './control-plane.js'
export { createDirectory, DirectoryDefaults, hasEnded, RECORD_STATES, SandboxDirectory, type DirectoryMessage, type RecordState, type SandboxRecord, type SandboxStateNotice } from './directory.js'
export { CLIENT_ADDRESS, createGateway, Gateway, SESSION_ADDRESS, type GatewayOptions } from './gateway.js'
export { createRegistry, createShardRecovery, Registry, RegistryDefaults, shardForSandbox, shardOf, type NodeStatus, type RegistryMessage } from './registry.js'
export { parseClientRequest, RequestLimits, type ClientRequest } from './requests.js'
export { createSession, Session, SessionDefaults, toView, type SandboxView, type SessionMessage } from './session.js'
export { gone, killMany, killOne, LifecycleDefaults, setTtl, type KillOutcome, type LifecycleDeps } from './lifecycle.js'
export { createImageIndex, ImageIndex, type ImageIndexMessage } from './image-index.js'
