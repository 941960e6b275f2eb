/** The SDK: the public face of src/sdk, and the package's main export. */
export { Client, ClientDefaults, connect, type ConnectOptions, type CreateSpec, type ListFilter } from './client.js'
export type { KillOutcome } from '../cluster/index.js'
export { configPath, resolveConfig, writeConfig, type WarrenConfig } from './config.js'
export type { ExecChunk } from './exec.js'
export { FilesClientDefaults, SandboxFiles, type FileInfo, type ReadFormat, type WriteData, type WriteInfo } from './files.js'
export { Sandbox, type Command, type CommandResult, type ExecHandle, type ExecOptions, type SandboxFilesApi, type SpawnOptions } from './sandbox.js'
export { SessionDefaults, ShellSession, type RunOptions, type SessionOptions } from './session.js'
export type { WorkerClient, WorkerClientApi } from './worker.js'
