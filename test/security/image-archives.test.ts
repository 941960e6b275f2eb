/**
 * Finding 8: image archives are untrusted input. `warren image build --from-oci F` / `--from-tar F`
 * is given hostile archives built here with tar-stream: device nodes, fifos, setuid files, members
 * climbing out or written through links, hard links to host files, tampered blobs, several
 * platforms, several images, oversized JSON. Nothing may appear on the host outside the built
 * layer, tampering is refused, the right platform is chosen, and a valid image runs.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as zlib from 'node:zlib'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { containerUnavailable } from '../../src/cluster/index.js'
import { repoRoot } from '../cluster/harness.js'
import { busyboxLayer, dockerArchive, ociArchive, sha256, tarOf, type Platform } from '../images/archives.js'
import { timed } from '../support/index.js'

const cli = join(repoRoot, 'bin', 'warren.js')
const AMD64: Platform = { os: 'linux', architecture: 'amd64' }
const ARM64: Platform = { os: 'linux', architecture: 'arm64', variant: 'v8' }

/** One control plane for the file; every build runs the real CLI with its own TMPDIR. */
let up: ChildProcess | undefined
let base = ''
let env: NodeJS.ProcessEnv = {}

test.before(async () => {
  base = mkdtempSync(join(tmpdir(), 'warren-sec-archives-'))
  env = { ...process.env, WARREN_CONFIG: join(base, 'config.json'), TMPDIR: join(base, 'tmp') }
  mkdirSync(join(base, 'tmp'))
  mkdirSync(join(base, 'victim'))
  writeFileSync(join(base, 'victim', 'secret'), 'host secret\n')
  up = spawn(process.execPath, [cli, 'up', '--port', '0', '--data-dir', join(base, 'data')], { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  await new Promise<void>((resolve, reject) => {
    up!.stdout!.on('data', (b: Buffer) => { out += b.toString(); if (out.includes('Ctrl-C')) resolve() })
    up!.stderr!.on('data', (b: Buffer) => { out += b.toString() })
    up!.once('exit', (code) => reject(new Error(`warren up exited ${code}: ${out}`)))
  })
})

test.after(async () => {
  if (up !== undefined && up.exitCode === null) {
    const exited = new Promise((resolve) => up!.once('exit', resolve))
    up.kill('SIGTERM')
    await exited
  }
  rmSync(base, { recursive: true, force: true })
})

interface Built { status: number | null, stdout: string, stderr: string, digest?: string }

/** Writes `archive` to a file and runs `warren image build FLAG file ...extra` on it. */
function build (flag: '--from-oci' | '--from-tar', archive: Buffer, extra: string[] = ['--no-tag']): Built {
  const file = join(base, `archive-${Math.random().toString(36).slice(2)}.tar`)
  writeFileSync(file, archive)
  try {
    const r = spawnSync(process.execPath, [cli, 'image', 'build', '--kind', 'base', flag, file, '--store', join(base, 'data', 'blobs'), ...extra],
      { env, encoding: 'utf8', timeout: 60_000 })
    const digest = /^(sha256:[0-9a-f]{64}) /.exec(r.stdout)?.[1]
    return { status: r.status, stdout: r.stdout, stderr: r.stderr, ...(digest !== undefined ? { digest } : {}) }
  } finally {
    rmSync(file, { force: true })
  }
}

/** The built layer's file in the store. */
const layerFile = (digest: string): string => join(base, 'data', 'blobs', 'blobs', 'sha256', digest.slice(7))

/** dump.erofs's count of one file type in a layer ("char dev", "block dev", "FIFO file"). */
function countInLayer (digest: string, kind: string): number {
  const out = execFileSync('dump.erofs', ['-S', layerFile(digest)], { encoding: 'utf8' })
  const m = new RegExp(`Filesystem ${kind} count:\\s+(\\d+)`).exec(out)
  assert.ok(m !== null, `dump.erofs printed no ${kind} count`)
  return Number(m[1])
}

/** Every device node, fifo, setuid or setgid file under `dir` (symlinks not followed). */
function hostileOnHost (dir: string): string[] {
  const found: string[] = []
  const walk = (d: string): void => {
    for (const name of readdirSync(d)) {
      const p = join(d, name)
      const st = lstatSync(p)
      if (st.isCharacterDevice() || st.isBlockDevice() || st.isFIFO()) found.push(`${p} (${st.isFIFO() ? 'fifo' : 'device'})`)
      else if (!st.isSymbolicLink() && (st.mode & 0o6000) !== 0) found.push(`${p} (mode ${(st.mode & 0o7777).toString(8)})`)
      if (st.isDirectory()) walk(p)
    }
  }
  walk(dir)
  return found
}

/** After every build: nothing hostile anywhere we can see, the build's TMPDIR is empty, the victim untouched. */
function assertHostClean (): void {
  assert.equal(hostileOnHost(base), [], 'no device node, fifo or setuid file on the host')
  assert.equal(readdirSync(join(base, 'tmp')), [], 'the build left nothing in its TMPDIR')
  assert.equal(readdirSync(join(base, 'victim')), ['secret'], 'nothing written next to the host file')
  assert.is(readFileSync(join(base, 'victim', 'secret'), 'utf8'), 'host secret\n')
}

const refused = (r: Built, code: RegExp, message: RegExp): void => {
  assert.is(r.status, 1, `refused: ${r.stdout}${r.stderr}`)
  assert.match(r.stderr, code)
  assert.match(r.stderr, message)
}

/** A layer holding every kind of special file a hostile image could try to bring onto the host. */
function specialFiles (): Promise<Buffer> {
  return tarOf([
    { name: 'dev/', type: 'directory' },
    { name: 'dev/mem', type: 'character-device', devmajor: 1, devminor: 1, mode: 0o666 },
    { name: 'dev/sda', type: 'block-device', devmajor: 8, devminor: 0, mode: 0o666 },
    { name: 'pipe', type: 'fifo', mode: 0o666 },
    { name: 'bin/', type: 'directory' },
    { name: 'bin/suid', mode: 0o4755, data: '#!/bin/sh\n' },
    { name: 'bin/sgid', mode: 0o2755, data: '#!/bin/sh\n' }
  ])
}

test('device nodes and fifos never reach the host nor the layer; setuid files stay only in the layer', timed(120_000, async () => {
  // The hostile members in the layer, and in the outer archive around it as well.
  const layer = await specialFiles()
  const oci = await ociArchive([{ platform: AMD64, layers: [layer] }])
  const outerExtra = await tarOf([
    { name: 'outer-mem', type: 'character-device', devmajor: 1, devminor: 1, mode: 0o666 },
    { name: 'outer-pipe', type: 'fifo' },
    { name: 'outer-suid', mode: 0o4755, data: 'x' }
  ])
  // tar-stream's packer ends an archive with two zero blocks: splice the extra members in front.
  const archive = Buffer.concat([outerExtra.subarray(0, outerExtra.length - 1024), oci])
  for (const [flag, input] of [['--from-oci', archive], ['--from-tar', zlib.gzipSync(layer)]] as const) {
    const r = build(flag, input)
    assert.is(r.status, 0, r.stderr)
    assert.ok(r.digest !== undefined, r.stdout)
    for (const kind of ['char dev', 'block dev', 'FIFO file']) assert.is(countInLayer(r.digest, kind), 0, `${flag}: no ${kind} in the layer`)
    assert.match(r.stderr, /device|fifo/i, 'the dropped members are noted')
    assertHostClean()
  }
}))

test('absolute names, a symlink to / and a file through it all land inside the image; ../ names and hard links out are refused', timed(120_000, async () => {
  const victim = join(base, 'victim')
  const inside = await tarOf([
    { name: `${victim}/abs-pwned`, data: 'x' },
    { name: 'escape', type: 'symlink', linkname: '/' },
    { name: `escape${victim}/link-pwned`, data: 'x' },
    { name: 'up', type: 'symlink', linkname: '../../../../../../../../..' },
    { name: `up${victim}/climb-pwned`, data: 'x' }
  ])
  const ok = build('--from-oci', await ociArchive([{ platform: AMD64, layers: [inside] }]))
  assert.is(ok.status, 0, ok.stderr)
  assertHostClean()
  // The same members, as a lower layer's links that an upper layer writes and whites out through.
  const lower = await tarOf([{ name: 'escape', type: 'symlink', linkname: victim }])
  const upper = await tarOf([{ name: 'escape/pwned', data: 'x' }, { name: 'escape/.wh.secret', data: '' }])
  const layered = build('--from-oci', await ociArchive([{ platform: AMD64, layers: [lower, upper] }]))
  assert.is(layered.status, 0, layered.stderr)
  assertHostClean()

  refused(build('--from-tar', await tarOf([{ name: '../../../../evil', data: 'x' }])), /WARREN_ERR_BAD_SPEC/, /outside/)
  assert.not.ok(existsSync(join(base, 'evil')))
  assertHostClean()
  for (const linkname of [join(victim, 'secret'), `../../../../../../..${victim}/secret`]) {
    const r = build('--from-oci', await ociArchive([{ platform: AMD64, layers: [await tarOf([{ name: 'stolen', type: 'link', linkname }])] }]))
    refused(r, /WARREN_ERR_BAD_SPEC/, /link/)
    assertHostClean()
  }
}))

test('a blob that does not match its digest is refused: a tampered OCI layer, a docker layer against its diff_id', timed(60_000, async () => {
  const good = await tarOf([{ name: 'file', data: 'good' }])
  const evil = await tarOf([{ name: 'file', data: 'evil' }])
  refused(build('--from-oci', await ociArchive([{ platform: AMD64, layers: [good], tamperLayer: { 0: evil } }])), /WARREN_ERR_BAD_SPEC/, /digest/)
  assertHostClean()
  refused(build('--from-oci', await dockerArchive([{ platform: AMD64, layers: [evil], diffIds: [sha256(good)] }])), /WARREN_ERR_BAD_SPEC/, /digest/)
  assertHostClean()
}))

test('the platform is chosen through OCI indexes and docker manifests: linux/amd64 by default, --platform the other; a missing one is named', timed(120_000, async () => {
  const layerFor = (p: Platform): Promise<Buffer> => tarOf([{ name: 'platform', data: `${p.os}/${p.architecture}\n` }])
  const amd = await layerFor(AMD64)
  const arm = await layerFor(ARM64)
  const amdOnly = build('--from-oci', await ociArchive([{ platform: AMD64, layers: [amd] }]))
  const armOnly = build('--from-oci', await ociArchive([{ platform: ARM64, layers: [arm] }]), ['--no-tag', '--platform', 'linux/arm64'])
  assert.ok(amdOnly.digest !== undefined && armOnly.digest !== undefined && amdOnly.digest !== armOnly.digest, amdOnly.stderr + armOnly.stderr)
  // arm64 first, so taking the first manifest is wrong.
  const both = [{ platform: ARM64, layers: [arm] }, { platform: AMD64, layers: [amd], gzip: true }]
  for (const archive of [await ociArchive(both), await ociArchive(both, { nested: true }), await dockerArchive(both)]) {
    assert.is(build('--from-oci', archive).digest, amdOnly.digest, 'linux/amd64 by default')
    assert.is(build('--from-oci', archive, ['--no-tag', '--platform', 'linux/arm64']).digest, armOnly.digest, '--platform linux/arm64')
    refused(build('--from-oci', archive, ['--no-tag', '--platform', 'linux/s390x']), /WARREN_ERR_BAD_SPEC/, /linux\/s390x.*linux\/arm64/)
  }
  // Two images of one platform: which one is meant cannot be guessed.
  const twins = await dockerArchive([{ platform: AMD64, layers: [amd] }, { platform: AMD64, layers: [arm] }])
  refused(build('--from-oci', twins), /WARREN_ERR_BAD_SPEC/, /2 images/)
  assertHostClean()
}))

test('JSON past its bound is refused before it is read, even when it compresses to nothing; a fifo in place of a manifest does not hang', timed(120_000, async () => {
  const layer = await tarOf([{ name: 'file', data: 'x' }])
  const padding = ' '.repeat(64 * 1024 * 1024)
  const bomb = zlib.gzipSync(await dockerArchive([{ platform: AMD64, layers: [layer], extra: { pad: padding } }]))
  assert.ok(bomb.length < 1024 * 1024, `the archive is small (${bomb.length} B)`)
  refused(build('--from-oci', bomb), /WARREN_ERR_BAD_SPEC/, /manifest\.json .*bytes/)
  const fifo = await tarOf([{ name: 'manifest.json', type: 'fifo' }, { name: 'index.json', type: 'fifo' }])
  refused(build('--from-oci', fifo), /WARREN_ERR_BAD_SPEC/, /not a docker save archive nor an OCI image layout/)
  assertHostClean()
}))

const hasZstd = 'createZstdDecompress' in zlib
;(hasZstd ? test.skip : test)('a zstd layer is refused with its media type named (this Node has no zstd)', timed(60_000, async () => {
  const zstd = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0])
  const r = build('--from-oci', await ociArchive([{ platform: AMD64, layers: [zstd], layerMediaType: 'application/vnd.oci.image.layer.v1.tar+zstd' }]))
  refused(r, /WARREN_ERR_UNSUPPORTED/, /application\/vnd\.oci\.image\.layer\.v1\.tar\+zstd/)
  assertHostClean()
}))

const noContainers = containerUnavailable()
;(noContainers === undefined ? test : test.skip)('a valid OCI image runs: whiteouts of names with a backslash and a newline apply, an opaque dir hides, setuid is kept', timed(180_000, async () => {
  const lower = await tarOf([
    { name: 'etc/', type: 'directory' },
    { name: 'etc/back\\slash', data: 'gone' },
    { name: 'etc/new\nline', data: 'gone' },
    { name: 'etc/kept', data: 'kept' },
    { name: 'opaque/', type: 'directory' },
    { name: 'opaque/old', data: 'gone' }
  ])
  const upper = await tarOf([
    { name: 'etc/.wh.back\\slash', data: '' },
    { name: 'etc/.wh.new\nline', data: '' },
    { name: 'opaque/.wh..wh..opq', data: '' },
    { name: 'opaque/new', data: 'new' },
    { name: 'bin/suid', mode: 0o4755, data: '#!/bin/sh\necho suid\n' }
  ])
  const archive = await ociArchive([{ platform: AMD64, layers: [await busyboxLayer(['sh', 'ls', 'cat', 'stat']), lower, upper], gzip: true }])
  const built = build('--from-oci', archive, ['--name', 'sec-archives:1'])
  assert.is(built.status, 0, built.stderr)
  assertHostClean()
  const ran = spawnSync(process.execPath, [cli, 'run', '--image', 'sec-archives:1', '--', 'sh', '-c', 'ls -A /etc /opaque; stat -c %a /bin/suid'],
    { env, encoding: 'utf8', timeout: 90_000 })
  assert.is(ran.status, 0, ran.stderr)
  assert.is(ran.stdout, '/etc:\nkept\npasswd\n\n/opaque:\nnew\n4755\n')
}))

test.run()
