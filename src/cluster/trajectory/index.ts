/** Durable trajectories: the public face of src/cluster/trajectory (docs/design.md, "Snapshots, trajectories, replay"). */
export {
  recordedOf, TrajectoryDefaults,
  type ExecStep, type LogRecord, type RecordedBytes, type ShipAck, type ShipBatch, type Step, type StepBody, type StepKind,
  type TrajectoryHeader, type TrajectoryLimits, type TrajectoryPage
} from './types.js'
export { decodeValue, encodeValue } from './codec.js'
export { BytesRecorder, RecordBudget, RecordPushDefaults, type PushBlob } from './recorded-bytes.js'
export { NodeLog, NodeLogDefaults, scanLog, type ScannedLog } from './node-log.js'
export { ShipDefaults, TrajectoryShipper, type ShipSend } from './shipper.js'
export { fitExec, SandboxRecorder, type ExecAsked, type ExecRecording, type RecorderDeps } from './recorder.js'
export { headerLayers, NodeTrajectories, NodeTrajectoryDefaults, type NodeTrajectoriesOptions, type OpenTrajectory } from './node-trajectories.js'
export { RecordingSink } from './recording-sink.js'
export { TrajectoryStore } from './store.js'
export { createTrajectories, Trajectories, type TrajectoriesMessage, type TrajectoriesOptions } from './actor.js'
