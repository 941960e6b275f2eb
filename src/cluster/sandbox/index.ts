/** Sandbox actors: the public face of src/cluster/sandbox. */
export { ExecOutput, ExecOutputDefaults, type OutputChunk, type OutputPage, type StreamName } from './exec-output.js'
export { Sandbox } from './sandbox.js'
export {
  SandboxDefaults, type SandboxMeta,
  type EndReason, type SandboxArgs, type SandboxEvent, type SandboxInfo, type SandboxMessage, type SandboxState, type WireExecOptions
} from './sandbox-types.js'
export { ExecCredit, OutputDefaults, OutputPool, type OutputLimits } from './output-pool.js'
export { StdinDefaults, StdinPipe, type StdinAck } from './stdin-pipe.js'
export {
  DATA_FILE_OPS, FilesDefaults, READ_ONLY_FILE_OPS,
  type ClientFileOp, type FileOp, type FileRequest, type FileRequestOf, type FilesLimits, type TarPage, type UploadFormat, type UploadResult, type UploadState
} from './file-requests.js'
export { SandboxFileService, TarDefaults } from './sandbox-files.js'
export { AheadBudget } from './file-budget.js'
export { memberPath } from './tar-sink.js'
export { memberNames, tarHeader, tarPadding, TAR_END, type TarMember } from './tar-format.js'
export { checkTtl } from './ttl.js'
export { expiryAfterResume, PauseControl, ttlDue, type FreezeState, type PauseHost } from './pause.js'
export { snapshotSandbox, type SnapshotDeps, type SnapshotResult } from './snapshot.js'
