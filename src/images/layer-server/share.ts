/**
 * One layer server, several backends (containers and VMs both stack its FUSE files). Each
 * backend's adopt tells the server which of its layers' users survived a restart (`sync`), and a
 * sync replaces the server's counts: the first backend to report would drop the other's users,
 * letting their layers be evicted under running sandboxes. Here each backend gets a view of the
 * service whose `sync` records that backend's users; the server is told the sum, once every
 * backend has reported (and again on any later report).
 */
import type { LayerService } from './client.js'

/**
 * Views of `service`, one per name in `parties`: each the same service, but for `sync`.
 * @param parties the backends that will each call `sync` once at adopt
 */
export function shareLayerService<P extends string> (service: LayerService, parties: readonly P[]): Record<P, LayerService> {
  const reported = new Map<P, Record<string, number>>()
  const sum = (): Record<string, number> => {
    const users: Record<string, number> = {}
    for (const part of reported.values()) for (const [d, n] of Object.entries(part)) users[d] = (users[d] ?? 0) + n
    return users
  }
  const views = {} as Record<P, LayerService>
  for (const party of parties) {
    views[party] = Object.create(service, {
      sync: {
        value: async (users: Record<string, number>): Promise<void> => {
          reported.set(party, { ...users })
          if (reported.size < parties.length) return
          await service.sync(sum())
        }
      }
    }) as LayerService
  }
  return views
}
