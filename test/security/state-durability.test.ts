/**
 * Finding 9 (control-plane state is fragile), attacked for real: `warren up` is killed with
 * SIGKILL at seeded random moments while an admin client writes as fast as it can (token
 * creations, quota changes, image tags); after each restart every write the client saw
 * acknowledged is there, and startup never fails. A torn legacy JSON file does not stop
 * startup, a legacy file is imported once, and a corrupt database is refused with a clear
 * message naming the file.
 */
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { createRng } from '../../sim/random.js'
import { QuotaDefaults } from '../../src/cluster/index.js'
import { connect, type Client } from '../../src/sdk/index.js'
import { timed } from '../support/index.js'
import { mustBeUp, startUp } from './warren-up.js'

const SEED = Number(process.env.WARREN_TEST_SEED ?? 9)
const ROUNDS = 4
const LANES = 4

function tempDir (defer: (fn: () => unknown) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'warren-state-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** What the client saw acknowledged, over all rounds. */
interface Acked {
  tokens: Map<string, string>
  /** tenant → the highest maxSandboxes acknowledged (each lane writes increasing values). */
  quotas: Map<string, number>
  images: Map<string, string>
}

/**
 * A layer put in the blob store of `data` by hand (as `image build --store` would), so tags,
 * which name only stored layers, have one to name.
 */
function storedLayer (data: string): string {
  const bytes = Buffer.from('a layer the tags of this test name\n')
  const hex = createHash('sha256').update(bytes).digest('hex')
  mkdirSync(join(data, 'blobs', 'blobs', 'sha256'), { recursive: true })
  writeFileSync(join(data, 'blobs', 'blobs', 'sha256', hex), bytes)
  return `sha256:${hex}`
}

/** Writes until `stop` is set; records only what was answered. */
async function writeLane (client: Client, round: number, lane: number, acked: Acked, stop: { now: boolean }, digest: string): Promise<void> {
  const quotaTenant = `r${round}-q${lane}`
  for (let i = 0; !stop.now; i++) {
    try {
      switch (i % 3) {
        case 0: {
          const tenant = `r${round}-l${lane}-t${i}`
          acked.tokens.set(tenant, await client.createToken(tenant, ['sandbox:read']))
          break
        }
        case 1: {
          await client.quotas(quotaTenant, { maxSandboxes: i })
          acked.quotas.set(quotaTenant, i)
          break
        }
        case 2: {
          const name = `dur/r${round}-l${lane}:v${i}`
          await client.request({ type: 'image-tag', name, digest, kind: 'base' })
          acked.images.set(name, digest)
          break
        }
      }
    } catch {
      return // the control plane died under us: whatever was not answered does not count
    }
  }
}

/** Checks every acknowledged write against the restarted control plane. */
async function verify (url: string, admin: Client, acked: Acked): Promise<void> {
  const tenants = new Map((await admin.tenants()).map((t) => [t.tenant, t.quotas]))
  for (const tenant of acked.tokens.keys()) assert.ok(tenants.has(tenant), `tenant ${tenant} was acknowledged and is gone`)
  for (const [tenant, max] of acked.quotas) {
    const q = tenants.get(tenant)
    assert.ok(q !== undefined && q.maxSandboxes >= max, `quota of ${tenant}: acknowledged ${max}, found ${q?.maxSandboxes}`)
  }
  const images = new Map((await admin.request<Array<{ name: string, digest: string }>>({ type: 'image-list' })).map((r) => [r.name, r.digest]))
  for (const [name, digest] of acked.images) assert.is(images.get(name), digest, `image ${name}`)
  // Every acknowledged key still logs in: eight connections at a time.
  const tokens = [...acked.tokens.values()]
  for (let i = 0; i < tokens.length; i += 8) {
    await Promise.all(tokens.slice(i, i + 8).map(async (token) => {
      const c = await connect({ url, token, connectTimeoutMs: 5000 })
      await c.close()
    }))
  }
}

test('kill -9 at random moments during writes loses no acknowledged write, and startup never fails', timed(240_000, async (defer) => {
  const dir = tempDir(defer)
  const data = join(dir, 'data')
  const config = join(dir, 'config.json')
  const rng = createRng(SEED)
  const acked: Acked = { tokens: new Map(), quotas: new Map(), images: new Map() }
  const layer = storedLayer(data)
  let writes = 0

  for (let round = 0; round <= ROUNDS; round++) {
    const up = mustBeUp(await startUp(data, config))
    defer(() => up.kill())
    const admin = await connect({ url: up.url, token: up.token, requestTimeoutMs: 5000, link: { reconnect: { maxAttempts: 0 } } })
    defer(() => admin.close())
    await verify(up.url, admin, acked)
    if (round === ROUNDS) break

    const before = acked.tokens.size + acked.images.size
    const stop = { now: false }
    const lanes = Array.from({ length: LANES }, (_, lane) => writeLane(admin, round, lane, acked, stop, layer))
    // The kill lands somewhere in the first 1.5 s of writing, a different moment each round.
    await new Promise((resolve) => setTimeout(resolve, 100 + Math.floor(rng() * 1400)))
    await up.kill('SIGKILL')
    stop.now = true
    await admin.close()
    await Promise.all(lanes)
    writes += acked.tokens.size + acked.images.size - before
  }
  if (process.env.WARREN_TEST_VERBOSE === '1') console.log(`${writes} acknowledged writes over ${ROUNDS} kills`)
  assert.ok(writes > 50, `only ${writes} writes were acknowledged: the test did not test much`)

  // Only a hash of each key is kept: no secret appears in any file of the data dir.
  const secrets = [...acked.tokens.values()].slice(0, 20).map((t) => t.slice('wrn_'.length + 12 + 1))
  for (const f of readdirSync(data)) {
    if (statSync(join(data, f)).isDirectory()) continue // the blob store: layers, no keys
    const bytes = readFileSync(join(data, f), 'latin1')
    for (const s of secrets) assert.not.ok(bytes.includes(s), `a key's secret is stored in clear in ${f}`)
  }
}))

test('a torn legacy JSON file does not stop startup; a legacy file is imported once', timed(60_000, async (defer) => {
  const dir = tempDir(defer)
  const config = join(dir, 'config.json')

  // Torn: the first half of a file, and plain garbage.
  const torn = join(dir, 'torn')
  mkdirSync(torn)
  writeFileSync(join(torn, 'iam.json'), '{"version":1,"joinTokenHash":"","tenants":{"a":{"quo')
  writeFileSync(join(torn, 'images.json'), randomBytes(300))
  const up1 = mustBeUp(await startUp(torn, config))
  defer(() => up1.kill())
  const c1 = await connect({ url: up1.url, token: up1.token })
  defer(() => c1.close())
  assert.equal((await c1.tenants()).map((t) => t.tenant), ['admin'])
  assert.ok(!existsSync(join(torn, 'iam.json')), 'the torn file is moved aside, not read again on every start')
  await c1.close()
  await up1.kill('SIGTERM')

  // A whole file of the earlier format: its tenant, quotas, key and image name survive the upgrade.
  const legacy = join(dir, 'legacy')
  mkdirSync(legacy)
  const keyId = 'abcdefghij01'
  const secret = randomBytes(32).toString('base64url')
  writeFileSync(join(legacy, 'iam.json'), JSON.stringify({
    version: 1,
    joinTokenHash: '',
    tenants: { old: { quotas: { maxSandboxes: 7, createsPerSecond: 3, createBurst: 4 } } },
    keys: { [keyId]: { tenant: 'old', scopes: ['sandbox:read'], hash: createHash('sha256').update(secret).digest('hex'), createdAt: new Date(0).toISOString() } }
  }))
  const digest = `sha256:${'cd'.repeat(32)}`
  writeFileSync(join(legacy, 'images.json'), JSON.stringify({ 'py:3.11': { digest, kind: 'base', taggedAt: new Date(0).toISOString(), history: [] } }))
  for (let start = 0; start < 2; start++) {
    const up = mustBeUp(await startUp(legacy, config))
    defer(() => up.kill())
    const admin = await connect({ url: up.url, token: up.token })
    defer(() => admin.close())
    // Quotas the old file did not know (the request rate) come from the defaults.
    assert.equal(await admin.quotas('old'), { ...QuotaDefaults, maxSandboxes: 7, createsPerSecond: 3, createBurst: 4 })
    const images = await admin.request<Array<{ name: string, digest: string }>>({ type: 'image-list' })
    assert.equal(images.map((i) => [i.name, i.digest]), [['py:3.11', digest]])
    const user = await connect({ url: up.url, token: `wrn_${keyId}_${secret}` })
    await user.close()
    await admin.close()
    await up.kill('SIGTERM')
    assert.ok(existsSync(join(legacy, 'iam.json.imported')) && !existsSync(join(legacy, 'iam.json')), 'iam.json is renamed once imported')
    assert.ok(existsSync(join(legacy, 'images.json.imported')) && !existsSync(join(legacy, 'images.json')), 'images.json is renamed once imported')
  }
}))

test('a corrupt state database stops startup with a message naming the file, not a stack trace', timed(30_000, async (defer) => {
  const dir = tempDir(defer)
  const data = join(dir, 'data')
  // A first start creates the database; then it is overwritten with garbage.
  const up = mustBeUp(await startUp(data, join(dir, 'config.json')))
  await up.kill('SIGTERM')
  const db = readdirSync(data).find((f) => f.endsWith('.db'))
  assert.ok(db !== undefined, `no database file in ${readdirSync(data).join(', ')}`)
  for (const f of readdirSync(data)) if (f.startsWith(db)) rmSync(join(data, f))
  writeFileSync(join(data, db), randomBytes(8192))

  const r = await startUp(data, join(dir, 'config.json'))
  if (!('exitCode' in r)) { await r.kill(); throw new Error('warren up started on a corrupt database') }
  assert.is(r.exitCode, 1, r.output)
  assert.ok(r.output.includes(join(data, db)), `the message names the file: ${r.output}`)
  assert.match(r.output, /WARREN_ERR_STATE_UNREADABLE/)
  assert.not.match(r.output, /\n\s+at /, `no stack trace: ${r.output}`)
}))

test.run()
