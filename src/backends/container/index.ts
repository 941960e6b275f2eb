/** Container sandboxes: the launcher, the in-sandbox agent's client and protocol, local layers. */
export { connectAgent, createAgentClient, type AgentClient, type AgentClientOptions } from './agent-client.js'
export type {
  AgentExecHandlers, AgentExecOptions, AgentExecResult, AgentExecution, AgentFiles, FileEntry, FileStat, FileType,
  ReadOptions, WriteOptions
} from './agent-types.js'
export { ContainerDefaults } from './defaults.js'
export { destroySandbox, launchSandbox, type LaunchedSandbox, type LaunchSandboxOptions } from './launcher.js'
export { isAlive, processInfo } from './proc.js'
export { AgentLimits, decodeBody, encodeFrame, FrameReader, type AgentMessage, type AgentRequest } from './protocol.js'
export { ContainerBackendDefaults, createContainerBackend, type CgroupProvider, type ContainerBackend, type ContainerBackendOptions, type SandboxCgroup } from './backend.js'
export { Journal } from './journal.js'
export { WarmPool, WarmPoolDefaults, type WarmPoolOptions } from './warm-pool.js'
export { CgroupDefaults, createCgroupProvider, detectLayout, type CgroupLayout } from './cgroups/index.js'
export { createEgressRouting, EgressDefaults, EGRESS_ENV, parseEgressRules, startEgressProxy, type EgressAsk, type EgressLookup, type EgressProxy, type EgressProxyOptions, type EgressRouting } from './egress.js'
export { canonicalHost, insideReason, isInternal } from './egress-address.js'
