import { createHash } from 'node:crypto'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { Actor, ActorSystem } from '../../src/actors/index.js'
import { ErrorCodes } from '../../src/errors.js'
import { createRemoteRef, exposeSystem, isStreamReader } from '../../src/transport/index.js'
import { timed, waitFor } from '../support/index.js'
import { connect, rejection, startServer } from './helpers.js'

/** Reads every stream it is given and remembers the sha256 of each. */
class StreamSink extends Actor {
  readonly sums: string[] = []
  async receive (message: unknown): Promise<unknown> {
    if (message === 'sums') return this.sums
    if (!isStreamReader(message)) return undefined
    const hash = createHash('sha256')
    for await (const chunk of message) hash.update(chunk)
    this.sums.push(hash.digest('hex'))
    return undefined
  }
}

class Echo extends Actor {
  receive (message: unknown): unknown { return message }
}

test('exposeSystem: tells to unknown or disallowed addresses are dead letters; asks answer NO_SUCH_ACTOR', timed(5000, async (defer) => {
  const system = new ActorSystem({ name: 'sys' })
  defer(() => system.shutdown())
  system.spawn(() => new Echo(), { name: 'echo' })
  system.spawn(() => new Echo(), { name: 'private' })
  const handler = exposeSystem(system, { allow: (address) => address !== 'sys/private' })
  const server = await startServer(defer, { handler })
  const client = await connect(defer, server)
  assert.is(await createRemoteRef(client, 'sys/echo').ask('hi'), 'hi')
  assert.is((await rejection(createRemoteRef(client, 'sys/private').ask('hi'))).code, ErrorCodes.NO_SUCH_ACTOR)
  assert.is((await rejection(createRemoteRef(client, 'sys/ghost').ask('hi'))).code, ErrorCodes.NO_SUCH_ACTOR)
  createRemoteRef(client, 'sys/ghost').tell('lost')
  createRemoteRef(client, 'sys/private').tell('refused')
  await waitFor(() => handler.deadLetters === 2)
}))

test('exposeSystem: a stream opened towards an actor reaches it as a StreamReader', timed(5000, async (defer) => {
  const system = new ActorSystem({ name: 'sys' })
  defer(() => system.shutdown())
  const sink = system.spawn(() => new StreamSink(), { name: 'sink' })
  const server = await startServer(defer, { handler: exposeSystem(system) })
  const client = await connect(defer, server)
  const data = Buffer.alloc(300_000, 7)
  const w = client.openStream('sys/sink')
  const finished = new Promise<void>((resolve) => w.once('finish', resolve))
  w.write(data)
  w.end()
  await finished
  assert.equal(await sink.ask('sums'), [createHash('sha256').update(data).digest('hex')])
  const orphan = client.openStream('sys/nobody')
  const err = await new Promise<{ code: string }>((resolve) => orphan.once('close', (e) => resolve(e as unknown as { code: string })))
  assert.is(err.code, ErrorCodes.NO_SUCH_ACTOR)
}))

test.run()
