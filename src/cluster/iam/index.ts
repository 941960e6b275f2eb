/** Identity and access: the public face of src/cluster/iam. */
export { createIam, Iam, type IamMessage } from './actor.js'
export { authorize, IamStore, isScope, QuotaDefaults, SCOPES, type Principal, type Quotas, type Scope } from './store.js'
export { createTokenBucket, type TokenBucket } from './token-bucket.js'
