/**
 * One layer server shared by two backends: each backend's sync is its own share, the server is
 * told the sum once both reported (never one backend's users alone), and again on a later report.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { shareLayerService, type LayerService } from '../../src/images/index.js'

function fakeService (): { service: LayerService, synced: Array<Record<string, number>> } {
  const synced: Array<Record<string, number>> = []
  const service = {
    resolve: async (d: string) => `/fuse/${d}`,
    release: async () => {},
    cached: () => ['sha256:a'],
    metrics: async () => { throw new Error('unused') },
    sync: async (users: Record<string, number>) => { synced.push(users) },
    pid: 42,
    close: async () => {},
    detach: async () => {}
  } as unknown as LayerService
  return { service, synced }
}

test('the server hears the sum of both backends\' users, only once both have reported', async () => {
  const { service, synced } = fakeService()
  const views = shareLayerService(service, ['container', 'microvm'] as const)
  await views.container.sync({ 'sha256:a': 2, 'sha256:b': 1 })
  assert.equal(synced, [], 'not the container\'s users alone: that would drop the VMs\'')
  await views.microvm.sync({ 'sha256:a': 1, 'sha256:c': 3 })
  assert.equal(synced, [{ 'sha256:a': 3, 'sha256:b': 1, 'sha256:c': 3 }])
  await views.microvm.sync({})
  assert.equal(synced[1], { 'sha256:a': 2, 'sha256:b': 1 })
  // Everything else is the service itself.
  assert.is(await views.microvm.resolve('sha256:z'), '/fuse/sha256:z')
  assert.equal(views.container.cached(), ['sha256:a'])
  assert.is(views.microvm.pid, 42)
})

test('with one backend, its sync goes through at once', async () => {
  const { service, synced } = fakeService()
  await shareLayerService(service, ['container'] as const).container.sync({ 'sha256:a': 1 })
  assert.equal(synced, [{ 'sha256:a': 1 }])
})

test.run()
