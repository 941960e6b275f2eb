import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'uvu'
import * as assert from 'uvu/assert'
import { repoRoot } from '../cluster/harness.js'
import { containerSkip, tenantCluster } from '../security/support.js'
import { timed, waitFor } from '../support/index.js'

if (containerSkip !== undefined) console.log(`shell tests skipped: ${containerSkip}`)
const ctest = containerSkip === undefined ? test : test.skip
const hasTmux = spawnSync('tmux', ['-V']).status === 0

/** A cluster, a sandbox, a config file for the CLI and a script running `shell(id)`; all ended with the test. */
async function setUp (defer: (fn: () => unknown) => void, nodeId: string): Promise<{ dir: string, script: string, env: NodeJS.ProcessEnv }> {
  const { cp, client } = await tenantCluster(defer, nodeId)
  const sb = await client.create({ backend: 'container' })
  defer(() => sb.kill())
  const dir = mkdtempSync(join(tmpdir(), 'warren-shell-'))
  defer(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ url: cp.url, token: await cp.createToken('tenant-a', ['sandbox:exec', 'sandbox:read']) }), { mode: 0o600 })
  const script = join(dir, 'shell.mjs')
  writeFileSync(script, `import { shell } from ${JSON.stringify(join(repoRoot, 'dist', 'src', 'cli', 'shell.js'))}\nprocess.exitCode = await shell(${JSON.stringify(sb.id)})\n`)
  return { dir, script, env: { ...process.env, WARREN_CONFIG: join(dir, 'config.json') } }
}

/** Runs a shell script with `input` piped to it (not a terminal); its exit code and all it printed. */
async function piped (defer: (fn: () => unknown) => void, script: string, env: NodeJS.ProcessEnv, input: string): Promise<{ code: number | null, out: string }> {
  const child = spawn(process.execPath, [script], { env, stdio: ['pipe', 'pipe', 'pipe'] })
  defer(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  let out = ''
  child.stdout.on('data', (b: Buffer) => { out += b.toString() })
  child.stderr.on('data', (b: Buffer) => { out += b.toString() })
  child.stdin.end(input)
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)))
  return { code, out }
}

ctest('warren shell with piped stdin: commands run on a terminal in the sandbox and it exits with the shell\'s code', timed(120_000, async (defer) => {
  const { script, env } = await setUp(defer, 'shell-pipe')
  const { code, out } = await piped(defer, script, env, 'tty; stty size; exit 3\n')
  assert.is(code, 3, out)
  assert.match(out, /\/dev\/pts\/\d+\r\n24 80\r\n/, JSON.stringify(out))

  // A window wider and taller than the cluster's bound gets the bound (was: the shell refused).
  const wide = script.replace(/\.mjs$/, '-wide.mjs')
  writeFileSync(wide, `Object.assign(process.stdout, { columns: 5000, rows: 3000 })\n${readFileSync(script, 'utf8')}`)
  const big = await piped(defer, wide, env, 'stty size; exit 0\n')
  assert.is(big.code, 0, big.out)
  assert.match(big.out, /1000 1000\r\n/, JSON.stringify(big.out))
}))

;(hasTmux ? ctest : test.skip)('warren shell in a real terminal (tmux): raw keys reach the sandbox, the size follows the window, exit code returns', timed(120_000, async (defer) => {
  const { dir, script, env } = await setUp(defer, 'shell-tty')
  const socket = `warren-shell-${process.pid}`
  const tmux = (...args: string[]): string => {
    const r = spawnSync('tmux', ['-L', socket, ...args], { env, encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`tmux ${args.join(' ')}: ${r.stderr}`)
    return r.stdout
  }
  const exitFile = join(dir, 'exit')
  tmux('new-session', '-d', '-s', 'w', '-x', '100', '-y', '30', `${process.execPath} ${script}; echo $? > ${exitFile}; sleep 30`)
  defer(() => { spawnSync('tmux', ['-L', socket, 'kill-server']) })
  const screen = (): string => tmux('capture-pane', '-p', '-t', 'w')
  await waitFor(() => /[#$] ?$/m.test(screen()), 30_000, 'a prompt').catch((err: Error) => { throw new Error(`${err.message}; the screen: ${JSON.stringify(screen())}`) })
  tmux('send-keys', '-t', 'w', 'stty size', 'Enter')
  await waitFor(() => screen().includes('30 100'), 10_000, 'the first size')
  tmux('resize-window', '-t', 'w', '-x', '120', '-y', '40')
  tmux('send-keys', '-t', 'w', 'stty size', 'Enter')
  await waitFor(() => screen().includes('40 120'), 10_000, 'the size after SIGWINCH')
  // ^C in raw mode interrupts the sandbox's foreground command, not this client.
  tmux('send-keys', '-t', 'w', 'sleep 100; echo not-interrupted', 'Enter')
  await new Promise((resolve) => setTimeout(resolve, 500))
  tmux('send-keys', '-t', 'w', 'C-c')
  tmux('send-keys', '-t', 'w', 'echo after-$((6*7))', 'Enter')
  await waitFor(() => screen().includes('after-42'), 10_000, 'the shell after ^C')
  assert.not.match(screen(), /^not-interrupted$/m, 'the rest of the command line did not run')
  tmux('send-keys', '-t', 'w', 'exit 7', 'Enter')
  await waitFor(() => existsSync(exitFile) && readFileSync(exitFile, 'utf8').trim() !== '', 20_000, 'the client exited')
  assert.is(readFileSync(exitFile, 'utf8').trim(), '7')
}))

test.run()
