/**
 * What the session does with every request's outcome, in one place: a refused request is logged
 * with its public code, the request's type, the tenant and key id (never the key), and the
 * field it names — the first of its kind (tenant, code, type) in full, and the others like it
 * within a window counted in one line, so a client repeating a bad request cannot flood the log
 * (the refusal log is the gateway's, shared by every session); an audited request (a row of the
 * audit table) is written to the audit log with its principal, ids, time and outcome, refused or
 * not.
 */
import type { Logger } from 'pino'
import { ErrorCodes, type ErrorCode, type WarrenError } from '../../errors.js'
import { createLogWindows, errorField, type LogWindows } from '../../log/index.js'
import { auditAction, type AuditRecord, type AuditSink } from '../audit/index.js'
import type { Principal } from '../iam/index.js'
import { toPublicError } from './public-error.js'
import { isClientRequestType, type ClientRequest } from './requests.js'

export interface RequestOutcomes {
  /** A request answered: audited when its type is. */
  ok (req: ClientRequest, result: unknown, startedAt: number): void
  /**
   * A request refused (`req` undefined when it did not parse): logged, audited when its type
   * is, and returned as the public error the client gets.
   */
  refused (body: unknown, req: ClientRequest | undefined, err: unknown, startedAt: number): WarrenError
}

/** The cluster could not do it (an operator's matter) against the client asked wrong (the client's). */
const WARN_CODES = new Set<ErrorCode>([ErrorCodes.TIMEOUT, ErrorCodes.OVERLOADED, ErrorCodes.NO_CAPACITY, ErrorCodes.BACKEND_UNAVAILABLE])

/** The level a refusal is logged at. */
export function levelOf (code: ErrorCode): 'error' | 'warn' | 'info' {
  if (code === ErrorCodes.INTERNAL) return 'error'
  return WARN_CODES.has(code) ? 'warn' : 'info'
}

const asObject = (v: unknown): Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : {}

/** The request's type as a log field: a string the client sent, cut short; anything else by its kind. */
function typeOf (body: unknown): string {
  const t = asObject(body).type
  return typeof t === 'string' ? t.slice(0, 40) : `(${typeof t})`
}

/** One refused request's log line, as it is logged when it is the first of its kind in a window. */
interface RefusalLine { level: 'error' | 'warn' | 'info', fields: Record<string, unknown> }

/** The refusals logged, a window at a time per kind (`tenant code type`). */
export type RefusalLog = LogWindows<string, RefusalLine>

export const RefusalLogDefaults = {
  /** After the first refusal of a kind is logged, the others like it are counted and logged once this often. */
  windowMs: 10_000
}

/** A refusal log writing to `log`: shared by every session of a gateway. */
export function createRefusalLog (log: Logger, windowMs = RefusalLogDefaults.windowMs): RefusalLog {
  return createLogWindows<string, RefusalLine>(windowMs, {
    first: (_kind, line) => log[line.level](line.fields, 'request refused'),
    summary: (kind, refused, samples) => {
      const [tenant, code, type] = kind.split(' ')
      log.warn({ tenant, code, type, refused, windowMs, fields: samples }, 'requests refused like the one logged before')
    }
  })
}

/**
 * @param o the session's principal, its audit log (none: nothing audited), its logger and the
 *   gateway's refusal log (none: one of the session's own)
 */
export function createRequestOutcomes (o: { principal: Principal, audit?: AuditSink, log: Logger, refusals?: RefusalLog }): RequestOutcomes {
  const refusals = o.refusals ?? createRefusalLog(o.log)
  const { tenant, keyId } = o.principal
  const audit = (r: Record<string, unknown>, parsed: boolean, result: unknown, outcome: string, err: WarrenError | undefined, startedAt: number): void => {
    if (o.audit === undefined) return
    const found = auditAction(r)
    if (found === undefined) return
    const at = Date.now()
    let fields: Partial<AuditRecord> = {}
    try {
      // The ids of a request that did not parse are not trusted enough to keep.
      if (parsed && found.rule.fields !== undefined) fields = found.rule.fields(r as never, result)
    } catch (e) {
      // A row that cannot read this result is a bug of the row: the request's answer stands, the record keeps what it can.
      o.log.error({ action: found.action, err: errorField(e) }, 'audit fields could not be read')
    }
    o.audit.append({
      at, action: found.action, tenant, keyId, outcome, ms: at - startedAt, ...fields,
      ...(err !== undefined && typeof err.details?.field === 'string' ? { field: err.details.field.slice(0, 256) } : {}),
      ...(err !== undefined ? { message: err.message.slice(0, 1024) } : {})
    })
  }
  return {
    ok (req, result, startedAt) {
      audit(req as unknown as Record<string, unknown>, true, result, 'ok', undefined, startedAt)
    },
    refused (body, req, err, startedAt) {
      const pub = toPublicError(err)
      const field = pub.details?.field
      const id = (req as { id?: unknown } | undefined)?.id
      const execId = (req as { execId?: unknown } | undefined)?.execId
      const type = req?.type ?? typeOf(body)
      // The kind's parts are bounded: a type the protocol does not have is `unknown`.
      const kind = `${tenant} ${pub.code} ${isClientRequestType(type) ? type : 'unknown'}`
      refusals.note(kind, { level: levelOf(pub.code), fields: {
        code: pub.code, type, tenant, keyId,
        ...(typeof field === 'string' ? { field: field.slice(0, 256) } : {}),
        ...(typeof id === 'string' ? { sandbox: id } : {}),
        ...(typeof execId === 'string' ? { exec: execId } : {}),
        reason: pub.message.slice(0, 1024),
        // A bug's own error, with its stack: the public one only says where.
        ...(pub.code === ErrorCodes.INTERNAL ? { err: errorField(err) } : {})
      } }, typeof field === 'string' ? field.slice(0, 256) : type)
      audit(req !== undefined ? req as unknown as Record<string, unknown> : asObject(body), req !== undefined, undefined, pub.code, pub, startedAt)
      return pub
    }
  }
}
