/** The node agent: the public face of src/cluster/node. */
export { createNodeAgent, NodeAgent, NodeAgentDefaults, sandboxAddress, withoutHostDirs, type CreateItem, type CreateOutcome, type NodeAgentOptions, type NodeMessage, type SandboxSummary } from './node-agent.js'
export { ControlLink, createControlLink, type ControlLinkMessage, type ControlLinkOptions } from './control-link.js'
export { containerUnavailable, defaultNodeId, startNode, type NodeOptions, type NodeProcess } from './node-process.js'
export { BlobPushDefaults, createBlobPusher, type BlobPusher, type PushedBlob } from './blob-push.js'
