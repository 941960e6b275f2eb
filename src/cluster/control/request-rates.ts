/**
 * Request rates per tenant: the gateway takes one token for every message a tenant's sessions
 * send, of every type, before the session sees it. One bucket per tenant across all its
 * sessions, kept while the control plane runs, so opening more sessions (or the same one again)
 * buys no more requests. A message past the rate is refused at once with WARREN_ERR_QUOTA
 * (`details.quota` `requests`, `retryAfterMs`): it is neither handled, nor logged one by one,
 * nor audited, so a flood costs the others no audit records, log lines or session turns.
 *
 * The rates come from the tenant's quotas (`requestsPerSecond`, `requestBurst`): read once, at the
 * tenant's first session, and replaced when an admin changes them.
 */
import { createError, ErrorCodes, type WarrenError } from '../../errors.js'
import { createTokenBucket, type Principal, type Quotas, type TokenBucket } from '../iam/index.js'

export type RequestRate = Pick<Quotas, 'requestsPerSecond' | 'requestBurst'>

/** The refusal of a request past the tenant's rate. */
export function tooManyRequests (tenant: string, rate: RequestRate, retryAfterMs: number): WarrenError {
  return createError(ErrorCodes.QUOTA, `tenant ${tenant} may send ${rate.requestsPerSecond} requests a second (bursts of ${rate.requestBurst}); try again in ${retryAfterMs} ms`,
    { quota: 'requests', limit: rate.requestsPerSecond, retryAfterMs })
}

export class TenantRequestRates {
  /** By tenant; at most one entry per tenant that ever held a session (tenants are made by an admin). */
  private readonly tenants = new Map<string, { rate: RequestRate, bucket: TokenBucket }>()

  constructor (private readonly now?: () => number) {}

  /** Sets the tenant's rate from `read` (its quotas) the first time one of its keys is seen; later changes come by `set`. */
  async learn (tenant: string, read: () => Promise<RequestRate>): Promise<void> {
    if (!this.tenants.has(tenant)) this.set(tenant, await read())
  }

  /** Sets (or replaces, with a full bucket) the tenant's rate. */
  set (tenant: string, rate: RequestRate): void {
    this.tenants.set(tenant, { rate, bucket: createTokenBucket(rate.requestsPerSecond, rate.requestBurst, this.now) })
  }

  /**
   * Takes one request of the tenant's rate.
   * @returns undefined when it may go on, else the refusal to answer it with
   */
  take (tenant: string): WarrenError | undefined {
    const t = this.tenants.get(tenant)
    // A tenant without a rate has no session: the gateway sets it before a session exists.
    if (t === undefined) return undefined
    const wait = t.bucket.take(1)
    return wait === 0 ? undefined : tooManyRequests(tenant, t.rate, wait)
  }

  /**
   * Takes one request of the principal's tenant, as `take`. Keys with the `admin` scope are held
   * to no rate: a rate set too low must not lock the operator out.
   */
  admit (principal: Principal): WarrenError | undefined {
    return principal.scopes.includes('admin') ? undefined : this.take(principal.tenant)
  }
}
