/**
 * The audit log (docs/design.md, "State and operations"): every control action with its
 * principal, ids, time and outcome, appended to its tenant's `audit/<tenant>.log` in the control
 * plane's data dir.
 */
export { AuditLog, type AuditLogOptions } from './audit-log.js'
export { AUDIT_ACTIONS, auditAction, type AuditRule } from './actions.js'
export { AuditDefaults, type AuditPage, type AuditQuery, type AuditRecord, type AuditSink, type AuditTunables } from './types.js'
