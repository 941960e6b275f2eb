import { spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem, type Ref } from '../../src/actors/index.js'
import { ErrorCodes } from '../../src/errors.js'
import { createLinkClient, createRemoteRef, exposeSystem, routeRemote, type LinkClient } from '../../src/transport/index.js'
import { timed, waitFor, type Cleanup } from '../support/index.js'
import { rejection, TOKEN } from './helpers.js'

const here = dirname(fileURLToPath(import.meta.url))

/** Starts the peer process; resolves with its port once it listens. */
async function startPeer (defer: Cleanup['defer']): Promise<number> {
  const child = spawn(process.execPath, [join(here, 'fixtures', 'echo-node.js')], {
    env: { ...process.env, WARREN_TEST_TOKEN: TOKEN },
    stdio: ['pipe', 'pipe', 'inherit']
  })
  defer(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  let out = ''
  return await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString()
      const m = /PORT (\d+)/.exec(out)
      if (m !== null) resolve(Number(m[1]))
    })
    child.once('exit', (code) => reject(new Error(`peer exited (${code}) before listening: ${out}`)))
  })
}

/** Collects what it is told (with the sender's address) and returns the list when asked 'list'. */
class Collector extends Actor {
  readonly got: Array<{ message: unknown, from: string | undefined }> = []
  receive (message: unknown): unknown {
    if (message === 'list') return this.got
    this.got.push({ message, from: this.ctx.sender?.address })
    return undefined
  }
}

async function setUp (defer: Cleanup['defer']): Promise<{ client: LinkClient, local: ActorSystem, collector: Ref }> {
  const port = await startPeer(defer)
  const local = new ActorSystem({ name: 'tester' })
  defer(() => local.shutdown())
  const collector = local.spawn(() => new Collector(), { name: 'collector' })
  const client = createLinkClient({ url: `ws://127.0.0.1:${port}`, token: TOKEN, handler: exposeSystem(local) })
  defer(() => client.close())
  await client.connect()
  return { client, local, collector }
}

test('a RemoteRef asks an actor in another process', timed(10_000, async (defer) => {
  const { client } = await setUp(defer)
  const echo = createRemoteRef(client, 'echo/echo')
  assert.is(echo.address, 'echo/echo')
  assert.equal(await echo.ask({ hello: 'world', n: [1, 2, 3] }), { hello: 'world', n: [1, 2, 3] })
  const many = await Promise.all(Array.from({ length: 2000 }, (_, i) => echo.ask<number>(i)))
  many.forEach((v, i) => assert.is(v, i))
}))

test('remote failures cross with their codes', timed(10_000, async (defer) => {
  const { client } = await setUp(defer)
  const refused = await rejection(createRemoteRef(client, 'echo/refuser').ask('anything'))
  assert.is(refused.code, ErrorCodes.NO_CAPACITY)
  assert.equal(refused.details, { free: 0 })
  assert.is((await rejection(createRemoteRef(client, 'echo/nobody').ask('hi'))).code, ErrorCodes.NO_SUCH_ACTOR)
}))

test('a tell with a sender is answered by a tell back across the link', timed(10_000, async (defer) => {
  const { client, collector } = await setUp(defer)
  assert.ok(createRemoteRef(client, 'echo/echo').tell('ping', collector))
  const got = await waitFor(async () => {
    const list = await collector.ask<Array<{ message: unknown, from: string }>>('list')
    return list.length > 0 ? list : undefined
  })
  assert.equal(got, [{ message: { echo: 'ping' }, from: 'echo/echo' }])
}))

test('the kernel routes remote addresses through the link (refFor)', timed(10_000, async (defer) => {
  const { client, local } = await setUp(defer)
  const uninstall = routeRemote(local, (name) => name === 'echo' ? client : undefined)
  defer(uninstall)
  const ref = local.refFor('echo/echo')
  assert.ok(ref !== undefined)
  assert.is(await ref.ask('via the router'), 'via the router')
  assert.is(local.refFor('elsewhere/x'), undefined)
}))

test.run()
