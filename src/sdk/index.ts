/** The SDK: the public face of src/sdk, and the package's main export. */
export { Client, ClientDefaults, connect, type ConnectOptions, type CreateSpec, type ListFilter } from './client.js'
export type { KillOutcome } from '../cluster/index.js'
export { configPath, resolveConfig, writeConfig, type WarrenConfig } from './config.js'
export type { ExecChunk } from './exec.js'
export { Sandbox, type CommandResult, type ExecHandle, type ExecOptions, type SandboxFilesApi } from './sandbox.js'
export type { WorkerClient, WorkerClientApi } from './worker.js'
