#!/usr/bin/env node
// Set-up shared by `npm start`, `npm test` and `npm run bench`: installs what is missing and
// builds. Every step checks first, so a second run costs about a second.
//
//   1. Debian packages the project uses (only as root, only the missing ones)
//   2. npm ci, when node_modules is missing or older than package-lock.json
//   3. the seccomp filters (of sandbox commands, of the `js` child processes), each generated
//      by seccomp-gen from its policy when the generator or the policy is newer than it
//   4. the container agent (warren-init, C), when its sources or its filter are newer than the binary
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
  // the seccomp allow-lists (sandbox commands', js children's) are compiled to BPF at build time by a generator linked with it
  { name: 'libseccomp-dev', provides: '/usr/include/seccomp.h' },
  // a realistic Debian layer with python3 for tests and benchmarks; bwrap as the benchmarks' baseline
  { name: 'debootstrap', provides: '/usr/sbin/debootstrap' },
  { name: 'bubblewrap', provides: '/usr/bin/bwrap' },
  // the agent's fuzz targets (npm run fuzz): clang, and libFuzzer with the sanitizer runtimes
  { name: 'clang', provides: '/usr/bin/clang' },
  { name: 'libclang-rt-14-dev', provides: '/usr/lib/llvm-14/lib/clang/14.0.6/include/fuzzer/FuzzedDataProvider.h' },
  // better-sqlite3 (the control plane's state) compiles its addon when no prebuilt one can be fetched
  { name: 'g++', provides: '/usr/bin/g++' },
  { name: 'make', provides: '/usr/bin/make' },
  // the Python SDK (python/) and its pytest suite run under Debian's python3, with no package index
  { name: 'python3-websockets', provides: '/usr/lib/python3/dist-packages/websockets/__init__.py' },
  { name: 'python3-msgpack', provides: '/usr/lib/python3/dist-packages/msgpack/__init__.py' },
  { name: 'python3-pytest', provides: '/usr/lib/python3/dist-packages/pytest/__init__.py' },
  // `pip install ./python` is tested offline: Debian's pip and the setuptools build backend
  { name: 'python3-pip', provides: '/usr/lib/python3/dist-packages/pip/__init__.py' },
  { name: 'python3-setuptools', provides: '/usr/lib/python3/dist-packages/setuptools/__init__.py' },
  // microvm sandboxes: QEMU's microvm machine (the guest kernel is extracted from Debian's
  // linux-image-cloud-amd64 into the node's data dir on first use, not installed here)
  { name: 'qemu-system-x86', provides: '/usr/bin/qemu-system-x86_64' },
  // the live page's browser test: headless Chromium driven by playwright-core (no browser download)
  { name: 'chromium', provides: '/usr/bin/chromium' },
  // the deploy tests render deploy/kubernetes with `kubectl kustomize` (no cluster needed)
  { name: 'kubernetes-client', provides: '/usr/bin/kubectl' }
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
  // An image build (deploy/Dockerfile) installs the packages it needs itself.
  if (process.env.WARREN_SETUP_NO_APT === '1') return
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
  // the live page (dist/page): skipped when it is newer than its sources
  run(process.execPath, [join(root, 'scripts', 'build-page.mjs')])
}

function newestMtime (dir, files) {
  return Math.max(...files.map((f) => statSync(join(dir, f)).mtimeMs))
}

// The seccomp filters: seccomp-gen (src/seccomp/, host gcc, libseccomp, run only here) writes
// each policy as BPF: the sandbox commands' as a header of one program per architecture that
// the agent includes, the `js` children's as the program bwrap loads. Without libseccomp
// nothing is generated: the agent does not build, and the function backend refuses to start
// `js` processes (its filter file is missing).
const SECCOMP_DIR = join(root, 'src', 'seccomp')
const SECCOMP_OUTPUTS = [
  { mode: 'header', policy: 'sandbox', out: join(root, 'dist', 'agent', 'gen', 'seccomp-policy.h') },
  { mode: 'bpf', policy: 'js', out: join(root, 'dist', 'js-jail', 'seccomp.bpf') }
]

function buildSeccompFilters () {
  const stale = SECCOMP_OUTPUTS.filter(({ policy, out }) =>
    !existsSync(out) || statSync(out).mtimeMs < newestMtime(SECCOMP_DIR, ['gen.c', 'policy.h', `${policy}-policy.c`]))
  if (stale.length === 0) return
  if (!existsSync('/usr/include/seccomp.h')) {
    log('libseccomp-dev is missing: the seccomp filters are not generated; the container agent cannot be built, and js calls will fail')
    return
  }
  log(`generating the seccomp filters (seccomp-gen: ${stale.map((o) => o.policy).join(', ')})`)
  const gen = join(root, 'dist', 'seccomp', 'seccomp-gen')
  mkdirSync(dirname(gen), { recursive: true })
  const sources = readdirSync(SECCOMP_DIR).filter((f) => f.endsWith('.c')).map((f) => join(SECCOMP_DIR, f))
  run('gcc', ['-O2', '-std=c11', '-Wall', '-Wextra', '-o', gen, ...sources, '-lseccomp'])
  for (const { mode, policy, out } of stale) {
    mkdirSync(dirname(out), { recursive: true })
    run(gen, [mode, policy, out])
  }
}

// The in-sandbox agent: a small static binary, so it runs in any layer stack (no libc needed
// there). musl keeps it under 100 KB; glibc's static build is the fallback (~700 KB).
function buildAgent () {
  const srcDir = join(root, 'src', 'backends', 'container', 'agent')
  const out = join(root, 'dist', 'agent', 'warren-init')
  const genDir = join(root, 'dist', 'agent', 'gen')
  const header = join(genDir, 'seccomp-policy.h')
  if (!existsSync(header)) {
    log(`cannot build the container agent without its seccomp filter (${header})`)
    process.exit(1)
  }
  const sources = readdirSync(srcDir).filter((f) => f.endsWith('.c') || f.endsWith('.h'))
  const newest = Math.max(newestMtime(srcDir, sources), statSync(header).mtimeMs)
  if (existsSync(out) && statSync(out).mtimeMs >= newest) return
  const cc = existsSync('/usr/bin/musl-gcc') ? '/usr/bin/musl-gcc' : 'gcc'
  log(`building the container agent with ${cc}`)
  mkdirSync(dirname(out), { recursive: true })
  // Built beside, then renamed: live sandboxes keep running the old file (writing it would fail ETXTBSY).
  const tmp = `${out}.${process.pid}.tmp`
  run(cc, ['-static', '-Os', '-std=c11', '-Wall', '-Wextra', '-ffunction-sections', '-fdata-sections',
    '-Wl,--gc-sections', '-s', '-I', genDir, '-o', tmp, ...sources.filter((f) => f.endsWith('.c')).map((f) => join(srcDir, f))])
  renameSync(tmp, out)
}

debianPackages()
npmDependencies()
buildSeccompFilters()
buildAgent()
build()
