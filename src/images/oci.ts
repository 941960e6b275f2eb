/**
 * Root file systems from container images: a `docker save` archive or an OCI image layout,
 * both as tar files. Their layers are applied in order onto one directory, honouring the
 * whiteouts of the OCI spec: `.wh.NAME` deletes NAME from the layers below, and a directory
 * holding `.wh..wh..opq` hides everything the layers below put in it.
 *
 * A layer is applied with the image's root as `/` (bubblewrap, busybox's sh, rm and tar, bound in
 * for the moment): every path it names, and every symlink a lower layer left, resolves inside the
 * tree, as in the container it becomes. Applied on the host instead, a lower layer's `etc -> /etc`
 * would let the next layer's `etc/passwd` land on the host's. The host only lists members
 * (refusing any outside the root) and decompresses.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, createReadStream, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs'
import { join, normalize } from 'node:path'
import { createError, ErrorCodes } from '../errors.js'
import { run } from './build.js'

const WHITEOUT = '.wh.'
const OPAQUE = '.wh..wh..opq'

/** Lists the member names of a (possibly compressed) tar file. */
function listTar (file: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn('tar', ['-tf', file], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    child.stdout.on('data', (b: Buffer) => { out += b.toString() })
    child.stderr.on('data', (b: Buffer) => { err += b.toString() })
    child.once('close', (code) => code === 0
      ? resolve(out.split('\n').filter((l) => l !== ''))
      : reject(createError(ErrorCodes.BAD_SPEC, `${file} is not a readable tar: ${err.trim()}`)))
  })
}

/** A member path made safe: relative, normalised, never climbing out of the root. */
function safeMember (name: string): string | undefined {
  const stripped = name.replace(/^\.?\/+/, '')
  if (stripped === '' || stripped === '.') return '' // the layer's root itself
  const n = normalize(stripped)
  if (n === '..' || n.startsWith('../') || n.startsWith('/')) return undefined
  return n.replace(/\/$/, '')
}

/** The static busybox whose sh, rm and tar apply layers inside the image's root. */
const BUSYBOX = '/bin/busybox'

const quote = (s: string): string => `'${s.replace(/'/g, "'\\''")}'`

/** The command that decompresses a layer blob by its magic bytes (OCI layers are usually gzip), or undefined for a plain tar. */
function decompressor (file: string): string[] | undefined {
  const head = Buffer.alloc(6)
  const fd = openSync(file, 'r')
  try { readSync(fd, head, 0, 6, 0) } finally { closeSync(fd) }
  if (head[0] === 0x1f && head[1] === 0x8b) return ['gzip', '-dc', file]
  if (head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return ['xz', '-dc', file]
  if (head.subarray(0, 3).toString('latin1') === 'BZh') return ['bzip2', '-dc', file]
  if (head.readUInt32LE(0) === 0xfd2fb528) return ['zstd', '-dc', file]
  return undefined
}

/**
 * Runs `script` with busybox's sh, the image root bound as `/` and the layer's tar on stdin.
 * As root with its capabilities (device nodes, owners), but in its own mount, pid, network, ipc
 * and uts namespaces, seeing nothing of the host but the one binary.
 */
function runInRoot (root: string, script: string, layerTar: string): Promise<void> {
  // Named `busybox` so it runs as the multi-call binary; its directory goes when the layer is in.
  const tools = `/.warren-apply-${randomBytes(6).toString('hex')}`
  const shell = `${tools}/busybox`
  const scriptFile = `${tools}/apply.sh`
  const staged = join(root, '..', `${tools.slice(1)}.sh`)
  writeFileSync(staged, script)
  const bwrap = ['--bind', root, '/', '--ro-bind', BUSYBOX, shell, '--ro-bind', staged, scriptFile,
    '--unshare-ipc', '--unshare-pid', '--unshare-net', '--unshare-uts', '--die-with-parent', '--new-session', '--cap-add', 'ALL',
    '--chdir', '/', '--', shell, 'sh', '-e', scriptFile, shell]
  return new Promise<void>((resolve, reject) => {
    const unzip = decompressor(layerTar)
    const feeder = unzip !== undefined ? spawn(unzip[0]!, unzip.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] }) : undefined
    const child = spawn('bwrap', bwrap, { stdio: ['pipe', 'ignore', 'pipe'] })
    let err = ''
    child.stderr.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-4000) })
    feeder?.stderr?.on('data', (b: Buffer) => { err = (err + b.toString()).slice(-4000) })
    const source = feeder?.stdout ?? createReadStream(layerTar)
    source.on('error', () => {})
    child.stdin.on('error', () => {}) // tar may stop reading early on a bad archive: its exit code says so
    source.pipe(child.stdin)
    const done = (code: number | null): void => {
      // The mount points bwrap made for the binary and the script are in the tree: not the image's.
      rmSync(join(root, tools.slice(1)), { recursive: true, force: true })
      rmSync(staged, { force: true })
      if (code === 0) resolve()
      else reject(createError(ErrorCodes.BAD_SPEC, `layer ${layerTar} could not be applied inside its root (exit ${code}): ${err.trim().split('\n').slice(-3).join(' | ')}`))
    }
    child.once('error', (e) => { feeder?.kill(); done(null); err += e.message })
    child.once('close', (code) => { feeder?.kill(); done(code) })
  })
}

/** Applies one layer tar onto `root`: whiteouts first, then the layer's own files, then the markers go. */
export async function applyLayer (root: string, layerTar: string): Promise<void> {
  const members = await listTar(layerTar)
  const lines: string[] = []
  const markers: string[] = []
  for (const raw of members) {
    const m = safeMember(raw)
    if (m === undefined) throw createError(ErrorCodes.BAD_SPEC, `layer ${layerTar} has a member outside its root: ${raw}`)
    if (m === '') continue
    const slash = m.lastIndexOf('/')
    const dir = slash < 0 ? '' : m.slice(0, slash)
    const base = slash < 0 ? m : m.slice(slash + 1)
    if (base === OPAQUE) {
      // Opaque: what lower layers put in this directory disappears; this layer refills it.
      const d = quote(`/${dir}`)
      lines.push(`for e in ${d}/* ${d}/.[!.]* ${d}/..?*; do if [ -e "$e" ] || [ -L "$e" ]; then "$BB" rm -rf -- "$e"; fi; done`)
      markers.push(`/${m}`)
    } else if (base.startsWith(WHITEOUT)) {
      lines.push(`"$BB" rm -rf -- ${quote(`/${dir === '' ? '' : dir + '/'}${base.slice(WHITEOUT.length)}`)}`)
      markers.push(`/${m}`)
    }
  }
  // As root, tar keeps owners (numeric: the image's, not this host's names), modes and device nodes.
  lines.push('"$BB" tar -x -f - -C / --numeric-owner')
  for (const m of markers) lines.push(`"$BB" rm -f -- ${quote(m)}`)
  // $1 is the busybox binary: the image may have no rm or tar of its own.
  await runInRoot(root, ['BB="$1"', ...lines].join('\n') + '\n', layerTar)
}

interface DockerManifestEntry { Layers: string[] }
interface OciIndex { manifests: Array<{ digest: string, mediaType?: string }> }
interface OciManifest { layers: Array<{ digest: string }> }

/** The layer files of an unpacked image archive, bottom first (docker save or OCI layout). */
export function imageLayers (dir: string): string[] {
  try {
    const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as DockerManifestEntry[]
    if (Array.isArray(manifest) && manifest[0]?.Layers !== undefined) return manifest[0].Layers.map((l) => join(dir, l))
  } catch { /* not a docker save archive: try the OCI layout */ }
  try {
    const index = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as OciIndex
    const blob = (digest: string): string => join(dir, 'blobs', ...digest.split(':'))
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as OciManifest
    return manifest.layers.map((l) => blob(l.digest))
  } catch (err) {
    throw createError(ErrorCodes.BAD_SPEC, `not a docker save archive nor an OCI image layout: ${(err as Error).message}`)
  }
}

/**
 * Unpacks an image archive's layers, in order, into `root`.
 * @param archive a `docker save` tar or an OCI image layout tar
 */
export async function unpackImage (archive: string, root: string): Promise<void> {
  const staging = mkdtempSync(join(root, '..', '.oci-'))
  try {
    await run('tar', ['-xf', archive, '-C', staging])
    for (const layer of imageLayers(staging)) await applyLayer(root, layer)
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}
