/** Supervision with OTP semantics: the public face of src/supervisors. */
export { BackoffDefaults, createBackoff, type Backoff, type BackoffOptions } from './backoff.js'
export { ChildSpecDefaults, type ChildSpec, type RestartType, type Shutdown } from './child-spec.js'
export {
  createDynamicSupervisor, DynamicSupervisor,
  type DynamicChildSpec, type DynamicSupervisorMessage, type DynamicSupervisorOptions
} from './dynamic-supervisor.js'
export { createRestartIntensity, IntensityDefaults, type IntensityOptions, type RestartIntensity } from './intensity.js'
export { createSupervisor, Supervisor, type ChildInfo, type Strategy, type SupervisorMessage, type SupervisorOptions } from './supervisor.js'
