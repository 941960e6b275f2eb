/**
 * deploy/kubernetes: every manifest parses, every object is valid against the Kubernetes
 * schemas (types, enums, required fields, and no unknown field), the kustomization renders
 * with `kubectl kustomize` and what it renders is valid too; the wiring between the objects
 * (selectors, the Service's port, Secrets named by the workloads, the probes) holds. A manifest
 * with a wrong field fails (the negative cases), so a passing run means something.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { parseAllDocuments } from 'yaml'
import { repoRoot } from '../cluster/harness.js'
import { validateObject } from './kube-schema.js'

const dir = join(repoRoot, 'deploy', 'kubernetes')
const KUBECTL = '/usr/bin/kubectl'

type Obj = Record<string, any>

/** The objects of one YAML stream; a YAML error fails the test naming the file. */
function parseStream (text: string, name: string): Obj[] {
  const docs = parseAllDocuments(text)
  const out: Obj[] = []
  for (const d of docs) {
    assert.equal(d.errors.map((e) => e.message), [], `${name}: YAML errors`)
    const v = d.toJS() as Obj | null
    if (v !== null) out.push(v)
  }
  return out
}

function manifests (): Array<{ file: string, objects: Obj[] }> {
  return readdirSync(dir).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml').sort()
    .map((file) => ({ file, objects: parseStream(readFileSync(join(dir, file), 'utf8'), file) }))
}

function assertValid (objects: Obj[], where: string): void {
  for (const o of objects) {
    const problems = validateObject(o)
    assert.equal(problems, [], `${where}: ${String(o.kind)} ${String(o.metadata?.name)}`)
  }
}

function rendered (): Obj[] {
  const r = spawnSync(KUBECTL, ['kustomize', dir], { encoding: 'utf8', timeout: 60_000 })
  assert.is(r.status, 0, `kubectl kustomize failed: ${r.stderr}`)
  return parseStream(r.stdout, 'kubectl kustomize output')
}

const kubectl = existsSync(KUBECTL) ? test : test.skip
if (!existsSync(KUBECTL)) console.log(`kustomize tests skipped: no ${KUBECTL} (node scripts/setup.mjs installs kubernetes-client)`)

test('every manifest parses and every object is valid against the Kubernetes schemas', () => {
  const all = manifests()
  assert.ok(all.length >= 4, `manifests: ${all.map((m) => m.file).join(', ')}`)
  for (const { file, objects } of all) assertValid(objects, file)
  const kinds = all.flatMap((m) => m.objects.map((o) => o.kind as string)).sort()
  for (const k of ['DaemonSet', 'Namespace', 'Secret', 'Service', 'StatefulSet']) assert.ok(kinds.includes(k), `a ${k}`)
})

test('the validator refuses wrong fields: a misspelled key, a wrong type, a bad enum, a missing required field', () => {
  const sts = manifests().flatMap((m) => m.objects).find((o) => o.kind === 'StatefulSet')!
  const broken: Array<[string, (o: Obj) => void, RegExp]> = [
    ['misspelled spec field', (o) => { o.spec.replica = 1 }, /\/spec\/replica: unknown field/],
    ['misspelled container field', (o) => { o.spec.template.spec.containers[0].imagePullPolcy = 'Always' }, /imagePullPolcy: unknown field/],
    ['replicas as a string', (o) => { o.spec.replicas = 'one' }, /\/spec\/replicas: type/],
    ['a probe scheme that is none', (o) => { o.spec.template.spec.containers[0].readinessProbe.httpGet.scheme = 'HTTPZ' }, /scheme: enum/],
    ['no selector', (o) => { delete o.spec.selector }, /required/],
    ['the wrong apiVersion', (o) => { o.apiVersion = 'v1' }, /must be apiVersion apps\/v1/]
  ]
  for (const [what, mutate, expected] of broken) {
    const copy = structuredClone(sts)
    mutate(copy)
    const problems = validateObject(copy)
    assert.ok(problems.some((p) => expected.test(p)), `${what}: ${JSON.stringify(problems)}`)
  }
})

kubectl('the kustomization renders, into the warren namespace, and what it renders is valid', () => {
  const objects = rendered()
  assertValid(objects, 'rendered')
  for (const o of objects) if (o.kind !== 'Namespace') assert.is(o.metadata.namespace, 'warren', `${o.kind} ${o.metadata.name}`)
  const listed = manifests().flatMap((m) => m.objects).length
  assert.is(objects.length, listed, 'the kustomization lists every manifest')
})

kubectl('the rendered objects fit together: selectors, the one port, secrets, probes, host mounts', () => {
  const objects = rendered()
  const one = (kind: string): Obj => { const f = objects.filter((o) => o.kind === kind); assert.is(f.length, 1, kind); return f[0]! }
  const sts = one('StatefulSet')
  const ds = one('DaemonSet')
  const svc = one('Service')
  const secrets = new Map(objects.filter((o) => o.kind === 'Secret').map((s) => [s.metadata.name as string, s]))
  for (const w of [sts, ds]) {
    const labels = w.spec.template.metadata.labels as Record<string, string>
    for (const [k, v] of Object.entries(w.spec.selector.matchLabels as Record<string, string>)) assert.is(labels[k], v, `${w.kind} selector matches its pods`)
    for (const c of w.spec.template.spec.containers as Obj[]) {
      for (const e of (c.env ?? []) as Obj[]) {
        const ref = e.valueFrom?.secretKeyRef
        if (ref !== undefined) assert.ok(secrets.get(ref.name)?.stringData?.[ref.key] !== undefined, `${w.kind} env ${e.name}: secret ${ref.name} has ${ref.key}`)
      }
      // Tokens come from secrets, never from the command line.
      assert.not.ok((c.args as string[]).includes('--token'), `${w.kind} passes no --token`)
    }
    for (const v of w.spec.template.spec.volumes ?? []) if (v.secret !== undefined) assert.ok(secrets.has(v.secret.secretName), `secret ${v.secret.secretName} exists`)
  }
  for (const [k, v] of Object.entries(svc.spec.selector as Record<string, string>)) assert.is(sts.spec.template.metadata.labels[k], v, 'the Service selects the control plane')
  assert.equal(svc.spec.ports.map((p: Obj) => p.port), [7100], 'one port')
  assert.is(sts.spec.serviceName, svc.metadata.name)
  assert.is(sts.spec.volumeClaimTemplates[0].metadata.name, 'data')
  const cp = sts.spec.template.spec.containers[0]
  assert.ok(cp.volumeMounts.some((m: Obj) => m.name === 'data' && m.mountPath === '/var/lib/warren'), 'the data volume holds /var/lib/warren')
  assert.is(cp.livenessProbe.httpGet.path, '/healthz')
  assert.is(cp.readinessProbe.httpGet.path, '/readyz')
  assert.is(cp.readinessProbe.httpGet.scheme, 'HTTPS')
  assert.ok(cp.args.includes('--tls-cert') && cp.args.includes('--tls-key'), 'the control plane serves TLS')
  const node = ds.spec.template.spec.containers[0]
  assert.is(node.securityContext.privileged, true)
  const join = node.args[node.args.indexOf('--join') + 1] as string
  assert.match(join, new RegExp(`^wss://${svc.metadata.name}\\.warren\\.svc:7100$`))
  assert.ok(node.env.some((e: Obj) => e.name === 'WARREN_CA'), 'the node verifies the control plane')
  const hostPaths = new Map((ds.spec.template.spec.volumes as Obj[]).filter((v) => v.hostPath !== undefined).map((v) => [v.hostPath.path as string, v.hostPath.type as string]))
  assert.is(hostPaths.get('/dev/fuse'), 'CharDevice')
  assert.is(hostPaths.get('/sys/fs/cgroup'), 'Directory')
  assert.ok(hostPaths.has('/var/lib/warren'), 'the node data dir is the host\'s')
  assert.not.ok(ds.spec.template.spec.hostPID, 'no hostPID')
})

test.run()
