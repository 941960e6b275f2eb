#!/usr/bin/env node
// Set-up shared by `npm start`, `npm test` and `npm run bench`: installs what is missing and
// builds. Every step checks first, so a second run costs about a second.
//
//   1. Debian packages the project uses (only as root, only the missing ones)
//   2. npm ci, when node_modules is missing or older than package-lock.json
//   3. the container agent (warren-init, C), when its sources are newer than the binary
//   4. the seccomp filter of the `js` child processes, when its generator is newer than it
//   5. tsc, incremental
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, renameSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

// Debian packages, each with a file that proves it is installed. Later features add theirs here.
const DEBIAN_PACKAGES = [
  // container sandboxes: the agent is built from C, layers with mkfs.erofs, the default layer is busybox
  { name: 'gcc', provides: '/usr/bin/gcc' },
  { name: 'libc6-dev', provides: '/usr/include/stdio.h' },
  { name: 'musl-tools', provides: '/usr/bin/musl-gcc' },
  { name: 'erofs-utils', provides: '/usr/bin/mkfs.erofs' },
  { name: 'busybox-static', provides: '/bin/busybox' },
  // a realistic Debian layer with python3 for tests and benchmarks; bwrap as the benchmarks' baseline
  { name: 'debootstrap', provides: '/usr/sbin/debootstrap' },
  { name: 'bubblewrap', provides: '/usr/bin/bwrap' },
  // the seccomp filter of the jailed `js` child processes is generated with libseccomp
  { name: 'libseccomp-dev', provides: '/usr/include/seccomp.h' }
]

function log (line) { process.stderr.write(`setup: ${line}\n`) }

function run (cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', ...opts })
  if (r.status !== 0) {
    log(`${cmd} ${args.join(' ')} failed (exit ${r.status ?? r.signal})`)
    process.exit(1)
  }
}

function debianPackages () {
  const missing = DEBIAN_PACKAGES.filter((p) => !existsSync(p.provides))
  if (missing.length === 0) return
  const names = missing.map((p) => p.name)
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    log(`missing Debian packages (install them as root): ${names.join(' ')}`)
    return
  }
  log(`installing Debian packages: ${names.join(' ')}`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  run('apt-get', ['update', '-q'], { env })
  run('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...names], { env })
}

function npmDependencies () {
  const marker = join(root, 'node_modules', '.package-lock.json')
  const lock = join(root, 'package-lock.json')
  if (existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs) return
  log('installing npm dependencies (npm ci)')
  run('npm', ['ci', '--no-audit', '--no-fund'])
}

function build () {
  run(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'])
}

// The in-sandbox agent: a small static binary, so it runs in any layer stack (no libc needed
// there). musl keeps it under 100 KB; glibc's static build is the fallback (~700 KB).
function buildAgent () {
  const srcDir = join(root, 'src', 'backends', 'container', 'agent')
  const out = join(root, 'dist', 'agent', 'warren-init')
  const sources = readdirSync(srcDir).filter((f) => f.endsWith('.c') || f.endsWith('.h'))
  const newest = Math.max(...sources.map((f) => statSync(join(srcDir, f)).mtimeMs))
  if (existsSync(out) && statSync(out).mtimeMs >= newest) return
  const cc = existsSync('/usr/bin/musl-gcc') ? '/usr/bin/musl-gcc' : 'gcc'
  log(`building the container agent with ${cc}`)
  mkdirSync(dirname(out), { recursive: true })
  // Built beside, then renamed: live sandboxes keep running the old file (writing it would fail ETXTBSY).
  const tmp = `${out}.${process.pid}.tmp`
  run(cc, ['-static', '-Os', '-std=c11', '-Wall', '-Wextra', '-ffunction-sections', '-fdata-sections',
    '-Wl,--gc-sections', '-s', '-o', tmp, ...sources.filter((f) => f.endsWith('.c')).map((f) => join(srcDir, f))])
  renameSync(tmp, out)
}

// The `js` children's seccomp filter: a small generator built against libseccomp writes the
// BPF program that bwrap loads (src/backends/function/js/seccomp/js-filter.c). Without
// libseccomp it is not built, and the function backend refuses to start `js` processes.
function buildJsFilter () {
  const src = join(root, 'src', 'backends', 'function', 'js', 'seccomp', 'js-filter.c')
  const dir = join(root, 'dist', 'js-jail')
  const out = join(dir, 'seccomp.bpf')
  if (existsSync(out) && statSync(out).mtimeMs >= statSync(src).mtimeMs) return
  if (!existsSync('/usr/include/seccomp.h')) {
    log('libseccomp-dev is missing: the js sandbox filter is not built, and js calls will fail')
    return
  }
  log('building the js sandbox seccomp filter')
  mkdirSync(dir, { recursive: true })
  const gen = join(dir, 'js-filter')
  run('gcc', ['-O2', '-std=c11', '-Wall', '-Wextra', '-o', gen, src, '-lseccomp'])
  const tmp = `${out}.${process.pid}.tmp`
  run(gen, [tmp])
  renameSync(tmp, out)
}

debianPackages()
npmDependencies()
buildAgent()
buildJsFilter()
build()
