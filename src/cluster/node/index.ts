/** The node agent: the public face of src/cluster/node. */
export { createNodeAgent, NodeAgent, sandboxAddress, type CreateItem, type CreateOutcome, type NodeAgentOptions, type NodeMessage } from './node-agent.js'
