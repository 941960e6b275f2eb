/**
 * resolveConfig's CA: given, else WARREN_CA, else the config file's — and the file's only for the
 * file's URL (a URL given another way does not inherit a CA meant for another control plane).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { resolveConfig } from '../../src/sdk/index.js'

const saved = { config: process.env.WARREN_CONFIG, url: process.env.WARREN_URL, token: process.env.WARREN_TOKEN, ca: process.env.WARREN_CA }
let dir: string
test.before(() => {
  dir = mkdtempSync(join(tmpdir(), 'warren-config-'))
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ url: 'wss://cp:7100', token: 'wrn_x', ca: '/etc/warren/ca.pem' }))
  process.env.WARREN_CONFIG = join(dir, 'config.json')
  delete process.env.WARREN_URL
  delete process.env.WARREN_TOKEN
  delete process.env.WARREN_CA
})
test.after(() => {
  rmSync(dir, { recursive: true, force: true })
  for (const [k, v] of Object.entries({ WARREN_CONFIG: saved.config, WARREN_URL: saved.url, WARREN_TOKEN: saved.token, WARREN_CA: saved.ca })) {
    if (v === undefined) delete process.env[k]; else process.env[k] = v
  }
})

test('the config file\'s CA comes with its URL, and only with it', () => {
  assert.equal(resolveConfig(), { url: 'wss://cp:7100', token: 'wrn_x', ca: '/etc/warren/ca.pem' })
  assert.equal(resolveConfig({ url: 'wss://other:7100' }), { url: 'wss://other:7100', token: 'wrn_x' })
  assert.equal(resolveConfig({ url: 'ws://a:1', token: 't' }), { url: 'ws://a:1', token: 't' })
})

test('a CA given wins over WARREN_CA, which wins over the file\'s', () => {
  process.env.WARREN_CA = '/env/ca.pem'
  try {
    assert.is(resolveConfig().ca, '/env/ca.pem')
    assert.is(resolveConfig({ ca: '/given/ca.pem' }).ca, '/given/ca.pem')
    process.env.WARREN_CA = ''
    assert.is(resolveConfig().ca, '/etc/warren/ca.pem', 'an empty WARREN_CA is unset')
  } finally {
    delete process.env.WARREN_CA
  }
})

test.run()
