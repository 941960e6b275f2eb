/**
 * Validates Kubernetes objects against the API's schemas, offline: the validators
 * `kubernetes-models` compiles from the Kubernetes OpenAPI document (one per definition).
 *
 * Those validators check types, enums, formats and required fields but let unknown fields
 * through (the OpenAPI document does not close its objects), and a misspelled field is the
 * commonest manifest mistake. So the object is validated through a proxy that records every
 * field the validator reads: a validator reads every field its schema defines (and every key of
 * a map), so a field it never read is one the schema does not have.
 */
import { validate as daemonSet } from 'kubernetes-models/_schemas/IoK8sApiAppsV1DaemonSet'
import { validate as statefulSet } from 'kubernetes-models/_schemas/IoK8sApiAppsV1StatefulSet'
import { validate as namespace } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Namespace'
import { validate as secret } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Secret'
import { validate as service } from 'kubernetes-models/_schemas/IoK8sApiCoreV1Service'

interface SchemaError { instancePath: string, keyword: string, params?: unknown }
type Validator = ((data: unknown) => boolean) & { errors?: SchemaError[] | null }

/** The kinds warren's manifests use, with the apiVersion each must name. */
export const KINDS: Record<string, { apiVersion: string, validate: Validator }> = {
  StatefulSet: { apiVersion: 'apps/v1', validate: statefulSet as Validator },
  DaemonSet: { apiVersion: 'apps/v1', validate: daemonSet as Validator },
  Service: { apiVersion: 'v1', validate: service as Validator },
  Secret: { apiVersion: 'v1', validate: secret as Validator },
  Namespace: { apiVersion: 'v1', validate: namespace as Validator }
}

/**
 * The problems of one object (empty when it is valid): schema violations and unknown fields,
 * each with its JSON path.
 */
export function validateObject (obj: unknown): string[] {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) return ['not an object']
  const { kind, apiVersion } = obj as { kind?: unknown, apiVersion?: unknown }
  const known = typeof kind === 'string' ? KINDS[kind] : undefined
  if (known === undefined) return [`kind ${String(kind)} is not one these tests know (${Object.keys(KINDS).join(', ')})`]
  if (apiVersion !== known.apiVersion) return [`${kind} must be apiVersion ${known.apiVersion}, not ${String(apiVersion)}`]
  const read = new Set<string>()
  const wrap = (value: unknown, path: string): unknown => {
    if (value === null || typeof value !== 'object') return value
    return new Proxy(value, {
      get (target, key, receiver) {
        const v = Reflect.get(target, key, receiver) as unknown
        if (typeof key !== 'string') return v
        read.add(`${path}/${key}`)
        return wrap(v, `${path}/${key}`)
      }
    })
  }
  const problems: string[] = []
  if (!known.validate(wrap(obj, ''))) {
    for (const e of known.validate.errors ?? []) problems.push(`${e.instancePath === '' ? '/' : e.instancePath}: ${e.keyword} ${JSON.stringify(e.params ?? {})}`)
  }
  const walk = (value: unknown, path: string): void => {
    if (value === null || typeof value !== 'object') return
    for (const [key, v] of Object.entries(value)) {
      const at = `${path}/${key}`
      if (!Array.isArray(value) && !read.has(at)) problems.push(`${at}: unknown field`)
      walk(v, at)
    }
  }
  walk(obj, '')
  return problems
}
