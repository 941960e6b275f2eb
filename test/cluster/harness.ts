/**
 * A real cluster for tests: the control plane in this process, node agents as child processes
 * started through the real CLI (`warren node`), so killing one with SIGKILL is a real crash.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { chmodSync, copyFileSync, mkdirSync, symlinkSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startControlPlane, type ControlPlane, type ControlPlaneOptions } from '../../src/cluster/index.js'
import { buildLayerFromDir, debootstrapTree, type Layer } from '../../src/images/index.js'

const here = dirname(fileURLToPath(import.meta.url))
export const repoRoot = join(here, '..', '..', '..')
export const functionsDir = join(here, 'fixtures', 'functions')

/**
 * A control plane on a free port. Its nodes are declared lost after 10 s without a heartbeat: a
 * test that kills a node and waits for its loss asks for `QUICK_LOSS`; every other test keeps
 * the long timeout, so a live node whose event loop a loaded machine stalls is not lost under it.
 */
export async function startTestControlPlane (options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  return await startControlPlane({ port: 0, heartbeatTimeoutMs: 10_000, ...options })
}

/** For a test that kills a node and waits for the control plane to declare it lost. */
export const QUICK_LOSS = { heartbeatTimeoutMs: 1500 } as const

export interface NodeChild { proc: ChildProcess, nodeId: string, kill (signal?: NodeJS.Signals): Promise<void> }

/** Starts `warren node` in a child process and resolves once it has joined. */
export function spawnNode (cp: ControlPlane, nodeId: string, dataDir: string, extraArgs: string[] = []): Promise<NodeChild> {
  const proc = spawn(process.execPath, [join(repoRoot, 'bin', 'warren.js'), 'node', '--join', cp.url, '--token', cp.joinToken, '--node-id', nodeId, '--data-dir', dataDir, '--functions-dir', functionsDir, ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()))
  const child: NodeChild = {
    proc,
    nodeId,
    async kill (signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
      await exited
    }
  }
  return new Promise((resolve, reject) => {
    let out = ''
    const timer = setTimeout(() => { void child.kill('SIGKILL'); reject(new Error(`node ${nodeId} did not join: ${out}`)) }, 20_000)
    proc.stdout!.on('data', (b: Buffer) => {
      out += b.toString()
      if (out.includes('joined')) { clearTimeout(timer); resolve(child) }
    })
    proc.stderr!.on('data', (b: Buffer) => { out += b.toString() })
    proc.once('exit', (code) => { clearTimeout(timer); reject(new Error(`node ${nodeId} exited with ${code}: ${out}`)) })
  })
}

export const ALL_SCOPES = ['sandbox:create', 'sandbox:exec', 'sandbox:read'] as const

/** Makes `root` a tiny image tree: /bin/busybox and the given applets linked to it. */
export function busyboxTree (root: string, applets: string[]): string {
  mkdirSync(join(root, 'bin'), { recursive: true })
  copyFileSync('/bin/busybox', join(root, 'bin', 'busybox'))
  chmodSync(join(root, 'bin', 'busybox'), 0o755)
  for (const a of applets) symlinkSync('busybox', join(root, 'bin', a))
  return root
}

/** Where the Debian test layer and its debootstrap tree are kept between runs. */
export const DEBIAN_CACHE = '/var/tmp/warren-test-layers'

/**
 * A Debian bookworm layer with `packages`, made the operator's way (`warren image build
 * --debootstrap` does the same): the tree is debootstrapped once and kept, the layer is built
 * into `DEBIAN_CACHE` as `<hex>.erofs`, so a node whose layers dir it is has it by digest.
 */
export async function debianLayer (packages: string[], onLine?: (line: string) => void): Promise<Layer> {
  const tree = await debootstrapTree(join(DEBIAN_CACHE, 'trees'), 'bookworm', packages, onLine)
  return await buildLayerFromDir(tree, DEBIAN_CACHE)
}

/** The Debian layer most tests use: bookworm with python3. */
export async function debianPythonLayer (onLine?: (line: string) => void): Promise<Layer> {
  return await debianLayer(['python3'], onLine)
}
