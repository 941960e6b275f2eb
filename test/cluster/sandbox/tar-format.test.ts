/**
 * The tree tar's writer (tar-format.ts) read back by the three readers that meet it: tar-stream
 * (the node and the TypeScript SDK), GNU tar and Python's tarfile. Every name comes back as its
 * exact bytes: short and long, UTF-8 or not, as a member or a symlink's target.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { extract } from 'tar-stream'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { memberNames, TAR_END, tarHeader, tarPadding, type TarMember } from '../../../src/cluster/index.js'
import { nameFromBytes, nameToBytes } from '../../../src/file-names.js'

const latin1 = (s: string): string => nameFromBytes(Buffer.from(s, 'latin1'))
const LONG = 'd'.repeat(120)
const members: Array<TarMember & { body?: string }> = [
  { name: 'plain.txt', type: 'file', mode: 0o644, mtimeMs: 1_000_000, size: 5, body: 'hello' },
  { name: 'é-utf8.txt', type: 'file', mode: 0o600, mtimeMs: 1_000_000, size: 1, body: 'u' },
  { name: latin1('caf\xe9'), type: 'file', mode: 0o644, mtimeMs: 1_000_000, size: 1, body: 'x' },
  { name: LONG, type: 'directory', mode: 0o755, mtimeMs: 1_000_000 },
  { name: `${LONG}/${latin1('n\xffo')}${'e'.repeat(90)}`, type: 'file', mode: 0o644, mtimeMs: 1_000_000, size: 2, body: 'lo' },
  { name: 'link', type: 'symlink', mode: 0o777, mtimeMs: 1_000_000, linkname: latin1('caf\xe9') },
  { name: 'longlink', type: 'symlink', mode: 0o777, mtimeMs: 1_000_000, linkname: `${LONG}/${'t'.repeat(50)}` }
]

function tarOf (list: typeof members): Buffer {
  return Buffer.concat([...list.flatMap((m) => [tarHeader(m), ...(m.body !== undefined ? [Buffer.from(m.body), tarPadding(m.body.length)] : [])]), TAR_END])
}

test('tar-stream reads every name and link target back exactly (through warren\'s pax keys where they are not UTF-8)', async () => {
  const parser = extract()
  const seen: Array<{ name: string, linkname: string, type: string, body: string }> = []
  const done = (async () => {
    for await (const entry of parser) {
      let body = ''
      for await (const c of entry) body += (c as Buffer).toString()
      const { name, linkname } = memberNames(entry.header)
      seen.push({ name, linkname, type: entry.header.type ?? '', body })
    }
  })()
  parser.end(tarOf(members))
  await done
  assert.equal(seen.map((e) => [e.name.replace(/\/$/, ''), e.type === 'symlink' ? e.linkname : '', e.body]),
    members.map((m) => [m.name, m.linkname ?? '', m.body ?? '']))
})

test('GNU tar and Python\'s tarfile read the same bytes (POSIX pax, hdrcharset=BINARY)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'warren-tarformat-'))
  try {
    const file = join(dir, 'tree.tar')
    writeFileSync(file, tarOf(members))
    const out = join(dir, 'out')
    mkdirSync(out)
    const gnu = spawnSync('tar', ['-xf', file, '-C', out], { encoding: 'utf8' })
    assert.is(gnu.status, 0, gnu.stderr)
    const names = readdirSync(out, { encoding: 'buffer' }).map((b) => b.toString('latin1')).sort()
    assert.equal(names, [LONG, 'caf\xe9', 'link', 'longlink', 'plain.txt', Buffer.from('é-utf8.txt').toString('latin1')].sort())
    assert.is(readFileSync(Buffer.concat([Buffer.from(join(out, 'caf')), Buffer.of(0xe9)])).toString(), 'x')
    assert.equal(readdirSync(join(out, LONG), { encoding: 'buffer' }).map((b) => b.toString('latin1')), [`n\xffo${'e'.repeat(90)}`])
    assert.ok(readlinkSync(join(out, 'link'), { encoding: 'buffer' }).equals(Buffer.from('caf\xe9', 'latin1')))
    assert.is(readlinkSync(join(out, 'longlink')), `${LONG}/${'t'.repeat(50)}`)
    const py = spawnSync('/usr/bin/python3', ['-c', `
import sys, tarfile
with tarfile.open(sys.argv[1], encoding="utf-8", errors="surrogateescape") as t:
    for m in t:
        print(m.name.encode("utf-8", "surrogateescape").hex(), m.linkname.encode("utf-8", "surrogateescape").hex())
`, file], { encoding: 'utf8' })
    assert.is(py.status, 0, py.stderr)
    const hex = (s: string): string => nameToBytes(s).toString('hex')
    assert.equal(py.stdout.trim().split('\n'), members.map((m) => `${hex(m.name)} ${hex(m.linkname ?? '')}`))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('a size past 8 GiB goes in the pax header, the ustar field left 0', () => {
  const header = tarHeader({ name: 'big', type: 'file', mode: 0o644, mtimeMs: 0, size: 9 * 2 ** 30 })
  assert.is(header.length, 3 * 512, 'a pax header, its records, then the member')
  assert.match(header.subarray(512, 1024).toString('latin1'), / size=9663676416\n/)
  assert.is(header.subarray(1024 + 124, 1024 + 135).toString('latin1'), '00000000000')
})

test.run()
