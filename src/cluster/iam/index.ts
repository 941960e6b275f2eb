/** Identity and access: the public face of src/cluster/iam. */
export { createIam, Iam, type IamMessage, type IamOptions } from './actor.js'
export { AdminKeys, type AdminKey, type EnsureOptions } from './admin-key.js'
export { checkQuotas, QuotaDefaults, RATE_BURSTS, type Quotas } from './quotas.js'
export { authorize, checkTenant, IamDefaults, IamStore, isScope, isTokenShaped, keyIdOf, newToken, SCOPES, type KeyView, type Principal, type Scope } from './store.js'
export { createTokenBucket, type TokenBucket } from '../../transport/index.js'
