/** The domain actors: the public face of src/cluster. */
export * from './control/index.js'
export * from './iam/index.js'
export * from './node/index.js'
export * from './placement/index.js'
export * from './sandbox/index.js'
export * from './trajectory/index.js'
export { BACKEND_KINDS, parseArgv, parseSandboxSpec, placementRequestOf, SpecDefaults, type SandboxLimits, type SandboxSpec } from './spec.js'
export { DeterminismDefaults, parseDeterminism, resolveDeterminism, sandboxEnvironment, type Determinism } from './spec-determinism.js'
