/**
 * Finding 4 (the relay's directory): a sandbox with egress may write only to its own upper
 * layer and the tmpfs mounts it owns. Nothing host-backed is writable: the tenant reads its
 * mount table and tries to create a file in every other mount point, the egress relay's
 * directory among them; the relay still reaches the proxy.
 */
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { timed } from '../support/index.js'
import { containerSkip, tenantCluster } from './support.js'

const ctest = containerSkip === undefined ? test : test.skip
if (containerSkip !== undefined) console.log(`relay directory tests skipped: ${containerSkip}`)

/**
 * For each mount point that is a directory: its file system type, its source, and whether a
 * file could be created in it (the file is removed again). Busybox sh only.
 */
const PROBE = `
while read -r id parent dev root point rest; do
  fstype=$(echo "$rest" | sed 's/.* - //' | cut -d' ' -f1)
  source=$(echo "$rest" | sed 's/.* - //' | cut -d' ' -f2)
  [ -d "$point" ] || continue
  if (echo x > "$point/.warren-probe") 2>/dev/null; then w=writable; rm -f "$point/.warren-probe"; else w=refused; fi
  echo "$point $fstype $source $root $w"
done < /proc/self/mountinfo
`

ctest('no host-backed mount of a sandbox with egress is writable; the relay still reaches the proxy', timed(120_000, async (defer) => {
  const { client } = await tenantCluster(defer, 'sec-relay')
  const sb = await client.create({ backend: 'container', network: { egress: ['example.com'] } })
  defer(() => sb.kill())

  const probe = await sb.exec(['sh', '-c', PROBE])
  assert.is(probe.exitCode, 0, probe.stderr)
  const mounts = probe.stdout.trim().split('\n').map((l) => {
    const [point, fstype, source, root, w] = l.split(' ')
    return { point: point!, fstype: fstype!, source: source!, root: root!, writable: w === 'writable' }
  })
  assert.ok(mounts.some((m) => m.point === '/dev/warren-egress'), `the relay's directory is mounted: ${probe.stdout}`)
  // The sandbox's own: its root (overlay on its quota-limited tmpfs) and the tmpfs mounts the
  // sandbox made for itself (whole file systems, root "/", named by the agent).
  const own = (m: typeof mounts[number]): boolean =>
    (m.point === '/' && m.fstype === 'overlay') || (m.fstype === 'tmpfs' && m.root === '/' && m.source.startsWith('warren-')) || (m.point === '/dev/shm' && m.source === 'shm')
  const writable = mounts.filter((m) => m.writable && !own(m)).map((m) => `${m.point} (${m.fstype} ${m.source} ${m.root})`)
  assert.equal(writable, [], `writable mounts not the sandbox's own:\n${writable.join('\n')}`)

  // 24 MiB into the relay's directory: refused, nothing lands on the host.
  const flood = await sb.exec(['dd', 'if=/dev/zero', 'of=/dev/warren-egress/flood', 'bs=1M', 'count=24'])
  assert.is.not(flood.exitCode, 0)
  assert.match(flood.stderr, /Read-only file system/)
  assert.is((await sb.exec(['ls', '/dev/warren-egress'])).stdout, 'proxy.sock\n')

  // The relay still reaches the proxy: a host not in the allow-list is the proxy's 403.
  const tunnel = await sb.exec(['sh', '-c', '(printf "CONNECT 127.0.0.1:9 HTTP/1.1\\r\\n\\r\\n"; sleep 1) | nc 127.0.0.1 3128'])
  assert.match(tunnel.stdout, /^HTTP\/1.1 403/, `${tunnel.stdout} ${tunnel.stderr}`)
}))

test.run()
