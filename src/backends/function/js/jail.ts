/**
 * The jail of a `js` child process. `vm` is not a security boundary (Node says so), so a child
 * is built for the case where untrusted code escapes it and holds `process`: it must then gain
 * nothing. bwrap (Debian bubblewrap) starts it:
 *
 * - in new mount, pid, network, ipc, uts and cgroup namespaces (`--die-with-parent`, so it
 *   ends with the node even when the node is killed outright; `--new-session`);
 * - on an empty, read-only tmpfs root holding only, read-only: the node binary at
 *   `/warren/bin/node`, the shared libraries it (and setpriv) load, at their usual paths, and
 *   the function backend's compiled code at `/warren/function` with the package's
 *   package.json at `/warren/package.json` (it makes the `.js` files ES modules). No /proc, no
 *   /dev, no /etc, no data directory, no home: the stack traces of warren's own frames show
 *   only `/warren/…`;
 * - under a seccomp filter (deny by default, see src/seccomp/js-policy.c), loaded by bwrap;
 * - as an unprivileged uid/gid with no_new_privs and no capabilities. A node running as root
 *   runs bwrap without a user namespace (a uid mapped in one would still be root on the host's
 *   files) and setpriv inside drops to `uid`/`gid`, clears the groups, the inheritable and
 *   bounding capability sets; bwrap hands setpriv only CAP_SETUID, CAP_SETGID and CAP_SETPCAP
 *   for that. A node that is not root is unprivileged already: bwrap adds a user namespace and
 *   drops every capability, and the child keeps the node's uid.
 *
 * bwrap reports a command killed by signal N as exit code 128 + N; `signalOfJailExit` turns
 * that back into the signal.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, realpathSync } from 'node:fs'
import { constants } from 'node:os'
import { dirname, join, posix } from 'node:path'
import { fileURLToPath } from 'node:url'

/** Where the jail's tools and filter are, and whom the child runs as. */
export interface JsJailOptions {
  /** 'jail' (the default): as described above. 'none': a plain child process, for benchmark baselines only. */
  isolation: 'jail' | 'none'
  /** Used when the node is root; a node that is not root keeps its own uid. */
  uid: number
  gid: number
  bwrapPath: string
  setprivPath: string
  /** The compiled filter that `scripts/setup.mjs` writes (see src/seccomp/js-policy.c). */
  seccompPath: string
}

/** The function backend's compiled code: the folder above this one (`dist/src/backends/function`). */
const FUNCTION_DIR = fileURLToPath(new URL('..', import.meta.url))

/** Defaults of the jail, in one place. */
export const JsJailDefaults: Readonly<JsJailOptions> = Object.freeze({
  isolation: 'jail',
  // The traditional `nobody`: it owns nothing on the host.
  uid: 65534,
  gid: 65534,
  bwrapPath: '/usr/bin/bwrap',
  setprivPath: '/usr/bin/setpriv',
  seccompPath: join(FUNCTION_DIR, '..', '..', '..', 'js-jail', 'seccomp.bpf')
})

/** Paths inside the jail. */
const IN_JAIL = {
  root: '/warren',
  node: '/warren/bin/node',
  functionDir: '/warren/function',
  packageJson: '/warren/package.json'
}

/** The fd the filter is handed to bwrap on (0–2 stdio, 3 the IPC channel). */
export const SECCOMP_FD = 4

/** How to start a jailed child. */
export interface JailCommand {
  file: string
  args: string[]
  /** The filter file, to be opened and passed as fd `SECCOMP_FD`. */
  seccompPath: string
}

/**
 * The command that starts `node <nodeArgs> <entry> <entryArgs>` in the jail, or a sentence
 * saying why this machine cannot jail a child (the pool then reports a start failure: untrusted
 * code never runs unjailed by accident).
 * @param entry the child's entry file, a file under the function backend's code
 */
export function jailCommand (options: JsJailOptions, nodeArgs: string[], entry: string, entryArgs: string[]): JailCommand | string {
  const missing = [options.bwrapPath, options.seccompPath].find((p) => !existsSync(p))
  if (missing !== undefined) return `${missing} is missing (run npm run setup as root: it installs bubblewrap and builds the filter)`
  const root = process.getuid?.() === 0
  if (root && !existsSync(options.setprivPath)) return `${options.setprivPath} is missing (Debian util-linux)`
  const pkg = packageJsonAbove(FUNCTION_DIR)
  if (pkg === undefined) return `no package.json above ${FUNCTION_DIR}`
  const node = realpathSync(process.execPath)
  const libraries = sharedLibraries(node)
  if (typeof libraries === 'string') return libraries
  const binds: Array<[from: string, to: string]> = [
    [node, IN_JAIL.node],
    [FUNCTION_DIR, IN_JAIL.functionDir],
    [pkg, IN_JAIL.packageJson],
    ...libraries.map((l): [string, string] => [l, l])
  ]
  let command = [IN_JAIL.node, ...nodeArgs, posix.join(IN_JAIL.functionDir, relativeTo(FUNCTION_DIR, entry)), ...entryArgs]
  if (root) {
    const setprivLibraries = sharedLibraries(options.setprivPath)
    if (typeof setprivLibraries === 'string') return setprivLibraries
    binds.push([options.setprivPath, options.setprivPath], ...setprivLibraries.map((l): [string, string] => [l, l]))
    command = [options.setprivPath, `--reuid=${options.uid}`, `--regid=${options.gid}`, '--clear-groups',
      '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs', '--', ...command]
  }
  const args = [
    '--unshare-ipc', '--unshare-pid', '--unshare-net', '--unshare-uts', '--unshare-cgroup-try',
    ...(root
      ? ['--cap-drop', 'ALL', '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', '--cap-add', 'CAP_SETPCAP']
      : ['--unshare-user', '--cap-drop', 'ALL']),
    '--die-with-parent', '--new-session',
    ...directories(binds.map(([, to]) => to)).flatMap((d) => ['--perms', '0555', '--dir', d]),
    ...binds.flatMap(([from, to]) => ['--ro-bind', from, to]),
    '--remount-ro', '/',
    '--chdir', '/',
    '--seccomp', String(SECCOMP_FD),
    '--', ...command
  ]
  return { file: options.bwrapPath, args, seccompPath: options.seccompPath }
}

/** The signal a jailed child died of, from bwrap's exit code (128 + N), if it was one. */
export function signalOfJailExit (code: number | null): NodeJS.Signals | null {
  if (code === null || code <= 128) return null
  const found = Object.entries(constants.signals).find(([, n]) => n === code - 128)
  return found === undefined ? null : found[0] as NodeJS.Signals
}

/** Every directory above `paths` (sorted, parents first), for bwrap to create world-readable. */
function directories (paths: string[]): string[] {
  const dirs = new Set<string>()
  for (const p of paths) {
    for (let d = posix.dirname(p); d !== '/'; d = posix.dirname(d)) dirs.add(d)
  }
  return [...dirs].sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b))
}

function relativeTo (dir: string, file: string): string {
  const rel = file.startsWith(dir) ? file.slice(dir.length) : undefined
  if (rel === undefined) throw new Error(`js child entry ${file} is not under ${dir}`)
  return rel.replace(/^\/+/, '')
}

function packageJsonAbove (dir: string): string | undefined {
  for (let d = dir; ; d = dirname(d)) {
    const candidate = join(d, 'package.json')
    if (existsSync(candidate)) return candidate
    if (dirname(d) === d) return undefined
  }
}

/** Per binary, once per process: the libraries do not change while the node runs. */
const librariesOf = new Map<string, string[] | string>()

/** The shared libraries `binary` loads, as ldd lists them (the dynamic loader included). */
function sharedLibraries (binary: string): string[] | string {
  let found = librariesOf.get(binary)
  if (found !== undefined) return found
  const r = spawnSync('ldd', [binary], { encoding: 'utf8', env: { PATH: '/usr/bin:/bin' } })
  if (r.status !== 0 && !/not a dynamic executable/.test(r.stderr + r.stdout)) {
    found = `ldd ${binary} failed: ${(r.error?.message ?? r.stderr).trim()}`
  } else {
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)" and "/lib64/ld-linux-x86-64.so.2 (0x…)";
    // the vDSO has no file.
    found = [...r.stdout.matchAll(/(?:=>\s*)?(\/\S+)\s+\(0x[0-9a-f]+\)/g)].map((m) => m[1]!)
  }
  librariesOf.set(binary, found)
  return found
}
