#!/usr/bin/env node
// Fuzzes the container agent's C code with libFuzzer, AddressSanitizer and UBSan (Debian's
// clang): its msgpack reader (target `mp`) and its request path from socket bytes to the action
// (target `request`). Sources: src/backends/container/agent/fuzz/.
//
//   npm run fuzz                  each target for 60 s, corpus kept in dist/fuzz/corpus/
//   npm run fuzz -- 300           each target for 300 s
//   node scripts/fuzz.mjs --runs=20000 --seed=1 [--target=mp]
//                                 a fixed number of inputs from a fixed seed, from the seeds and
//                                 the checked-in regressions only (what the tests run)
//
// Prints libFuzzer's progress, then one line per target, and last one JSON line:
//   fuzz summary {"ok":true,"targets":{"mp":{"ok":true,"runs":…,"cov":…,"execPerSec":…},…}}
// Exits 1 when a target crashed, leaked or hit a sanitizer error (the input is saved under
// dist/fuzz/artifacts/), 2 when it cannot build (no clang: node scripts/setup.mjs installs it).
// Once fixed, such an input goes into src/backends/container/agent/fuzz/regressions/TARGET/,
// which every run (the tests' too) starts from.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { seedInputs } from '../src/backends/container/agent/fuzz/seeds.mjs'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const agentDir = join(root, 'src', 'backends', 'container', 'agent')
const fuzzDir = join(agentDir, 'fuzz')
const outDir = join(root, 'dist', 'fuzz')

const FUZZ_DEFAULTS = {
  seconds: 60,
  clang: '/usr/bin/clang',
  /** Inputs longer than this are not tried: values and frames nest and split well below it. */
  maxLen: { mp: 4096, request: 16384 },
  /** Per-input time limit: the agent must answer a frame in far less. */
  timeoutS: 10,
  rssLimitMb: 2048
}

// Agent sources not linked into the request target: the set-up and entry of the agent (not on
// the request path), and what stubs.c stands in for (file operations, the relay, seccomp).
const NOT_ON_REQUEST_PATH = new Set(['main.c', 'launch.c', 'sandbox.c', 'files.c', 'relay.c', 'seccomp.c', 'vm.c', 'ram.c'])
// Every way the linked agent code could start a process or touch the host (a terminal too): stubs.c answers them.
const WRAPPED = ['fork', 'vfork', 'clone', 'posix_spawn', 'posix_spawnp', 'execve', 'execvp', 'execvpe', 'kill', 'sethostname', 'openpty']

const TARGETS = {
  mp: { main: 'fuzz_mp.c', agent: ['mp.c', 'buf.c'], extra: [], wrap: [] },
  request: {
    main: 'fuzz_request.c',
    agent: readdirSync(agentDir).filter((f) => f.endsWith('.c') && !NOT_ON_REQUEST_PATH.has(f)),
    extra: ['stubs.c'],
    wrap: WRAPPED
  }
}

function parseArgs (argv) {
  const opts = { seconds: FUZZ_DEFAULTS.seconds, runs: undefined, seed: undefined, targets: Object.keys(TARGETS) }
  for (const a of argv) {
    const [key, value] = a.startsWith('--') ? a.slice(2).split('=') : ['seconds', a]
    if (key === 'seconds' && Number(value) > 0) opts.seconds = Number(value)
    else if (key === 'runs' && Number.isInteger(Number(value))) opts.runs = Number(value)
    else if (key === 'seed' && Number.isInteger(Number(value))) opts.seed = Number(value)
    else if (key === 'target' && value in TARGETS) opts.targets = [value]
    else {
      process.stderr.write(`fuzz: unknown argument ${a}\nusage: npm run fuzz -- [SECONDS] | --runs=N [--seed=S] [--target=${Object.keys(TARGETS).join('|')}]\n`)
      process.exit(2)
    }
  }
  return opts
}

function newestMtime (files) {
  return Math.max(...files.map((f) => statSync(f).mtimeMs))
}

/** Builds dist/fuzz/fuzz_NAME unless it is newer than every source it depends on. */
function build (name) {
  const t = TARGETS[name]
  const out = join(outDir, `fuzz_${name}`)
  const sources = [join(fuzzDir, t.main), ...t.extra.map((f) => join(fuzzDir, f)), ...t.agent.map((f) => join(agentDir, f))]
  const headers = [...readdirSync(agentDir).filter((f) => f.endsWith('.h')).map((f) => join(agentDir, f)),
    ...readdirSync(fuzzDir).filter((f) => f.endsWith('.h')).map((f) => join(fuzzDir, f))]
  if (existsSync(out) && statSync(out).mtimeMs >= newestMtime([...sources, ...headers, fileURLToPath(import.meta.url)])) return out
  if (!existsSync(FUZZ_DEFAULTS.clang)) {
    process.stderr.write(`fuzz: no clang at ${FUZZ_DEFAULTS.clang}: run node scripts/setup.mjs as root (it installs clang and libclang-rt-14-dev)\n`)
    process.exit(2)
  }
  mkdirSync(outDir, { recursive: true })
  // Built beside, then renamed: a run in progress keeps its binary.
  const tmp = `${out}.${process.pid}.tmp`
  const args = ['-g', '-O1', '-std=c11', '-Wall', '-Wextra', '-fno-omit-frame-pointer',
    '-fsanitize=fuzzer,address,undefined', '-fno-sanitize-recover=undefined',
    ...(t.wrap.length ? [`-Wl,${t.wrap.map((s) => `--wrap=${s}`).join(',')}`] : []),
    '-o', tmp, ...sources]
  process.stderr.write(`fuzz: building ${out}\n`)
  const r = spawnSync(FUZZ_DEFAULTS.clang, args, { stdio: 'inherit' })
  if (r.status !== 0) {
    process.stderr.write(`fuzz: building fuzz_${name} failed (exit ${r.status ?? r.signal})\n`)
    process.exit(2)
  }
  renameSync(tmp, out)
  return out
}

/** Writes the target's seeds into dir (regenerated each run: they follow the protocol as the code does). */
function writeSeeds (name, dir) {
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  for (const [file, bytes] of seedInputs(name)) writeFileSync(join(dir, file), bytes)
  return dir
}

/** The numbers libFuzzer printed last, and whether anything went wrong. */
function summarize (output, code) {
  const progress = [...output.matchAll(/^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/gm)].at(-1)
  const stat = (key) => Number(new RegExp(`^stat::${key}:\\s+(\\d+)`, 'm').exec(output)?.[1] ?? NaN)
  const problem = /ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|runtime error:|deadly signal|ERROR: libFuzzer|check failed|fuzz stubs:/.exec(output)?.[0]
  return {
    ok: code === 0 && problem === undefined,
    runs: stat('number_of_executed_units'),
    cov: Number(progress?.[2] ?? NaN),
    ft: Number(progress?.[3] ?? NaN),
    corpus: Number(progress?.[4] ?? NaN),
    execPerSec: stat('average_exec_per_sec'),
    ...(code === 0 ? {} : { exit: code }),
    ...(problem === undefined ? {} : { problem })
  }
}

/** Runs one target; resolves with its summary. */
function runTarget (name, binary, opts) {
  const regressions = join(fuzzDir, 'regressions', name)
  // A fixed run starts from the seeds alone, in a directory of its own, so its result depends on
  // nothing left by earlier runs (nor on a long run going on beside it).
  const fixed = opts.runs !== undefined
  const scratch = fixed ? mkdtempSync(join(tmpdir(), `warren-fuzz-${name}-`)) : undefined
  const corpus = scratch !== undefined ? join(scratch, 'corpus') : join(outDir, 'corpus', name)
  const seeds = writeSeeds(name, scratch !== undefined ? join(scratch, 'seeds') : join(outDir, 'seeds', name))
  const artifacts = join(outDir, 'artifacts')
  mkdirSync(corpus, { recursive: true })
  mkdirSync(artifacts, { recursive: true })
  const args = [
    fixed ? `-runs=${opts.runs}` : `-max_total_time=${opts.seconds}`,
    ...(opts.seed !== undefined ? [`-seed=${opts.seed}`] : []),
    `-max_len=${FUZZ_DEFAULTS.maxLen[name]}`, `-timeout=${FUZZ_DEFAULTS.timeoutS}`, `-rss_limit_mb=${FUZZ_DEFAULTS.rssLimitMb}`,
    '-print_final_stats=1', `-artifact_prefix=${join(artifacts, `${name}-`)}`,
    corpus, seeds, ...(existsSync(regressions) ? [regressions] : [])
  ]
  return new Promise((resolve) => {
    const child = spawn(binary, args, {
      cwd: outDir,
      env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=1', UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1' },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let output = ''
    const take = (b) => { process.stderr.write(b); output += b }
    child.stdout.on('data', take)
    child.stderr.on('data', take)
    child.on('close', (code, signal) => {
      if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true })
      resolve(summarize(output, code ?? signal))
    })
  })
}

const opts = parseArgs(process.argv.slice(2))
const results = {}
for (const name of opts.targets) {
  const binary = build(name)
  const r = await runTarget(name, binary, opts)
  results[name] = r
  process.stderr.write(`fuzz: ${name}: ${r.ok ? 'ok' : `FAILED (${r.problem ?? `exit ${r.exit}`})`}, ${r.runs} runs, cov ${r.cov}, ${r.execPerSec} exec/s\n`)
}
const ok = Object.values(results).every((r) => r.ok)
process.stdout.write(`fuzz summary ${JSON.stringify({ ok, targets: results })}\n`)
process.exitCode = ok ? 0 : 1
