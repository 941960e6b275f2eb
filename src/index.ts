/**
 * warren: sandboxes for training and evaluating AI agents.
 *
 *   import { connect } from 'warren'
 *   const client = await connect()
 */
export * from './sdk/index.js'
export { ErrorCodes, isWarrenError, WarrenError, type ErrorCode } from './errors.js'
export type { SandboxView } from './cluster/index.js'
