/** Identity and access: the public face of src/cluster/iam. */
export { createIam, Iam, type IamMessage } from './actor.js'
export { checkQuotas, QuotaDefaults, type Quotas } from './quotas.js'
export { authorize, checkTenant, IamStore, isScope, SCOPES, type Principal, type Scope } from './store.js'
export { createTokenBucket, type TokenBucket } from './token-bucket.js'
