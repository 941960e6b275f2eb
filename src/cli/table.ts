/**
 * Every `warren` command: its words, summary, flags and handler. Parsing, `warren --help` and
 * `warren help CMD` all read this table, so a new command is one more entry here.
 */
import { command, type CommandSpec } from './command.js'
import * as admin from './admin.js'
import { audit } from './audit.js'
import * as commands from './commands.js'
import * as image from './image.js'
import * as replay from './replay.js'
import { create, exec, run, STDIN_FLAGS } from './run.js'
import { SANDBOX_FLAGS } from './sandbox-flags.js'
import * as servers from './servers.js'
import { shell } from './shell.js'
import * as snapshots from './snapshots.js'
import * as sim from './sim.js'

const LAYER_FLAGS = {
  'lazy-layers': { type: 'boolean', help: 'load layers on demand from the blob store (the default)' },
  'no-lazy-layers': { type: 'boolean', help: 'fetch each layer whole before a sandbox starts' }
} as const

/** The microvm backend's guest kernel, when not Debian's cloud kernel (fetched on first use). */
const KERNEL_FLAGS = {
  kernel: { type: 'string', value: 'FILE', help: 'the guest kernel (bzImage) microVMs boot, instead of Debian\'s' },
  'kernel-modules': { type: 'string', value: 'DIR', help: 'that kernel\'s lib/modules/<release> tree (with modules.dep)' }
} as const

/** The servers' log level (JSON lines on stderr; pretty on a terminal). */
const LOG_FLAGS = {
  'log-level': { type: 'string', value: 'LEVEL', help: 'trace, debug, info (the default), warn, error or silent; also WARREN_LOG_LEVEL' }
} as const

const DIR_FLAGS = {
  'data-dir': { type: 'string', value: 'DIR', help: 'where state, blobs and layers are kept' },
  'functions-dir': { type: 'string', value: 'DIR', help: 'modules the function backend may run by name' }
} as const

/** Sizing of the simulated cluster, shared by `sim` and `sim plan`. */
const SIM_CLUSTER_FLAGS = {
  'cores-per-node': { type: 'string', value: 'C', help: 'cores of each node' },
  'mem-per-node': { type: 'string', value: 'SIZE', help: 'memory of each node (512GiB, 1.5TiB)' },
  duration: { type: 'string', value: 'DURATION', help: 'simulated time (24h, 90m)' },
  seed: { type: 'string', value: 'S', help: 'seed of the workload' },
  'node-crashes-per-day': { type: 'string', value: 'N', help: 'crashes of each node a day (they fall silent until the registry notices)' },
  report: { type: 'string', value: 'F.html', help: 'write charts to F.html' },
  json: { type: 'string', value: 'F', help: 'write the whole summary as JSON to F' }
} as const

/** A tenant's quotas, for `quota set` and `tenant quotas`. */
const QUOTA_FLAGS = {
  'max-sandboxes': { type: 'string', value: 'N', help: 'sandboxes it may hold at once (0 to 1e9)' },
  'creates-per-second': { type: 'string', value: 'R', help: 'creations a second, sustained (0.001 to 1e9)' },
  'create-burst': { type: 'string', value: 'B', help: 'creations in a burst (1 to 1e9)' },
  'requests-per-second': { type: 'string', value: 'R', help: 'requests a second of every kind, sustained, over all its sessions (0.001 to 1e9)' },
  'request-burst': { type: 'string', value: 'B', help: 'requests in a burst (1 to 1e9)' },
  'trajectory-storage': { type: 'string', value: 'SIZE', help: 'what the control plane keeps of its trajectories (64GiB; MiB when plain); past it its oldest ended ones go first' }
} as const

/** The commands in the order `warren --help` lists them. */
export const COMMANDS: readonly CommandSpec[] = [
  command({
    name: 'up',
    summary: 'control plane and a local node in one process; writes ~/.warren/config.json',
    details: 'The admin key is made at the first start and kept across restarts: the one the config file holds.\n' +
      'Lost it (the config gone)? --rotate-admin-key makes a new one and revokes the old one.',
    flags: {
      port: { type: 'string', value: 'PORT', help: 'port to listen on (7100; 0 picks a free one)' },
      host: { type: 'string', value: 'ADDR', help: 'address to listen on (127.0.0.1)' },
      ...DIR_FLAGS,
      shards: { type: 'string', value: 'K', help: 'shards of the sandbox directory' },
      'no-local-node': { type: 'boolean', help: 'control plane only (nodes join with warren node)' },
      'trajectory-retention': { type: 'string', value: 'DURATION', help: 'how long a trajectory is kept after its sandbox ended (7d; 12h, 90m)' },
      'rotate-admin-key': { type: 'boolean', help: 'make a new admin key (the old one stops working); for an admin key lost' },
      'metrics-token-file': { type: 'string', value: 'F', help: '/metrics wants the token in F as a bearer token (default: open, like /healthz)' },
      'tls-cert': { type: 'string', value: 'FILE', help: 'serve wss:// and https:// with this certificate (PEM, chain after the leaf)' },
      'tls-key': { type: 'string', value: 'FILE', help: 'the certificate\'s private key (PEM)' },
      ca: { type: 'string', value: 'FILE', help: 'the CA that signed --tls-cert, for the local node and clients (default: the certificate itself)' },
      ...LAYER_FLAGS,
      ...KERNEL_FLAGS,
      ...LOG_FLAGS
    },
    run: async ({ values }) => await servers.up(values)
  }),
  command({
    name: 'node',
    summary: 'join a control plane as a node',
    flags: {
      join: { type: 'string', value: 'URL', help: 'the control plane\'s URL' },
      token: { type: 'string', value: 'JOIN_TOKEN', help: 'the join token warren up printed (default: WARREN_JOIN_TOKEN)' },
      ca: { type: 'string', value: 'FILE', help: 'verify a wss:// control plane against this CA (PEM; default: WARREN_CA, else the system\'s roots)' },
      'node-id': { type: 'string', value: 'ID', help: 'this node\'s id (kept in the data dir by default)' },
      ...DIR_FLAGS,
      ...LAYER_FLAGS,
      ...KERNEL_FLAGS,
      'egress-host': { type: 'string', multiple: true, value: 'NAME=ADDR:PORT', help: 'an inside address sandboxes may reach by NAME' },
      ...LOG_FLAGS
    },
    run: async ({ values }) => await servers.node(values)
  }),
  command({
    name: 'create',
    summary: 'create a sandbox and print its id (only the id: ID=$(warren create))',
    flags: SANDBOX_FLAGS,
    run: async ({ values }) => await create(values)
  }),
  command({
    name: 'run',
    summary: 'create a sandbox, run CMD with this stdin and output, exit with its code, kill it',
    args: '-- CMD…',
    rest: true,
    details: 'Stdin is passed to the command unless it is a terminal: streamed to a container sandbox,\n' +
      'read ahead (up to 512 KiB) for the function backend. Ctrl-C kills the sandbox and exits 130.',
    flags: { ...SANDBOX_FLAGS, ...STDIN_FLAGS },
    run: async ({ values, rest }) => await run(rest, values)
  }),
  command({
    name: 'ps',
    summary: 'list your live sandboxes (with --all, those ended in the last minutes too)',
    flags: {
      label: { type: 'string', multiple: true, value: 'K=V', help: 'only sandboxes with this label' },
      state: { type: 'string', value: 'STATE', help: 'only sandboxes in this state (creating, ready, paused, stopping, hibernated, gone, failed, lost)' },
      all: { type: 'boolean', help: 'ended sandboxes too (gone, failed, lost)' }
    },
    run: async ({ values }) => await commands.ps(values)
  }),
  command({
    name: 'exec',
    summary: 'run CMD in a sandbox with this stdin and output, exit with its code',
    args: 'ID -- CMD…',
    positionals: { min: 1, max: 1 },
    rest: true,
    details: 'Stdin is passed to the command unless it is a terminal, as with warren run. Ctrl-C, or the\n' +
      'reader of its output going away (warren exec ID -- yes | head -1), kills the command; the sandbox stays.',
    flags: STDIN_FLAGS,
    run: async ({ positionals, values, rest }) => await exec(positionals[0]!, rest, values)
  }),
  command({
    name: 'shell',
    summary: 'an interactive shell in a sandbox, on a pseudo-terminal (bash when it has it, else sh)',
    args: 'ID',
    positionals: { min: 1, max: 1 },
    flags: {},
    run: async ({ positionals }) => await shell(positionals[0]!)
  }),
  command({
    name: 'log',
    summary: 'what happened in a sandbox, also after it ended (its trajectory)',
    args: 'ID',
    positionals: { min: 1, max: 1 },
    flags: { json: { type: 'boolean', help: 'JSON lines: the header, then one step per line (bytes as base64)' } },
    run: async ({ positionals, values }) => await commands.log(positionals[0], values)
  }),
  command({
    name: 'kill',
    summary: 'end sandboxes',
    args: 'ID…',
    positionals: { min: 1, max: Infinity },
    flags: {},
    run: async ({ positionals }) => await commands.kill(positionals)
  }),
  command({
    name: 'pause',
    summary: 'freeze a sandbox (container or microvm): its processes stop, its memory is kept, its CPU is free',
    args: 'ID',
    positionals: { min: 1, max: 1 },
    flags: {},
    run: async ({ positionals }) => await commands.freeze('pause', positionals[0])
  }),
  command({
    name: 'resume',
    summary: 'thaw a paused sandbox (its processes go on), or bring a hibernated one back (same id, its files)',
    args: 'ID',
    positionals: { min: 1, max: 1 },
    flags: {},
    run: async ({ positionals }) => await commands.freeze('resume', positionals[0])
  }),
  command({
    name: 'snapshot',
    summary: 'cut a snapshot of a sandbox\'s files and print its id (create from it: warren create --snapshot ID)',
    args: 'ID',
    positionals: { min: 1, max: 1 },
    flags: {
      name: { type: 'string', value: 'N:T', help: 'a name to create from it by (moved from the snapshot that had it)' },
      memory: { type: 'boolean', help: 'save the whole VM (microvm): memory and running processes, not only files' }
    },
    run: async ({ positionals, values }) => await snapshots.snapshot(positionals[0]!, values)
  }),
  command({
    name: 'snapshots',
    summary: 'list your snapshots, newest first',
    flags: { sandbox: { type: 'string', value: 'ID', help: 'only those of this sandbox' } },
    run: async ({ values }) => await snapshots.snapshots(values)
  }),
  command({
    name: 'snapshot-rm',
    summary: 'delete a snapshot (its layers go once no sandbox or snapshot uses them)',
    args: 'ID_OR_NAME',
    positionals: { min: 1, max: 1 },
    flags: {},
    run: async ({ positionals }) => await snapshots.snapshotRm(positionals[0]!)
  }),
  command({
    name: 'fork',
    summary: 'snapshot a sandbox once and create N sandboxes from it; prints their ids',
    args: 'ID N',
    positionals: { min: 2, max: 2 },
    flags: {
      label: { type: 'string', multiple: true, value: 'K=V', help: 'a label for the forks (beside the sandbox\'s own)' },
      memory: { type: 'boolean', help: 'fork the whole VM (microvm): each fork goes on with its running processes' }
    },
    run: async ({ positionals, values }) => await snapshots.fork(positionals[0]!, positionals[1]!, values)
  }),
  command({
    name: 'hibernate',
    summary: 'snapshot a sandbox and free its node, keeping its id; prints the snapshot\'s id',
    args: 'ID',
    positionals: { min: 1, max: 1 },
    details: 'Its files are kept, its processes are not. warren exec ID (or an SDK attach) resumes it.',
    flags: {},
    run: async ({ positionals }) => await snapshots.hibernate(positionals[0]!)
  }),
  command({
    name: 'replay',
    summary: 'apply a sandbox\'s trajectory again in a fresh sandbox and report the first command that differs',
    args: 'ID',
    positionals: { min: 1, max: 1 },
    details: 'Prints the fresh sandbox\'s id, the steps applied and the first divergence (expected and actual exit\n' +
      'codes, byte counts, sha256 and heads). Exit 0 when every command matched, 2 when one diverged.',
    flags: {
      'up-to': { type: 'string', value: 'N', help: 'the last seq to apply' },
      compare: { type: 'string', value: 'exit|output', help: 'what must match: the exit code, or it and both outputs (output)' }
    },
    run: async ({ positionals, values }) => await replay.replay(positionals[0]!, values)
  }),
  command({
    name: 'restore',
    summary: 'make a lost or ended sandbox again under its id: its newest snapshot, then the steps after it',
    args: 'ID',
    positionals: { min: 1, max: 1 },
    details: 'Without a snapshot it starts from the recorded spec and applies every step. Exit 2 when a command diverged.',
    flags: {},
    run: async ({ positionals }) => await replay.restore(positionals[0]!)
  }),
  command({
    name: 'token create',
    summary: 'issue an API key, printed once (admin)',
    flags: {
      tenant: { type: 'string', value: 'T', help: 'the tenant the key acts for (required)' },
      scopes: { type: 'string', value: 'A,B', help: 'its scopes (sandbox:create,sandbox:exec,sandbox:read)' },
      expires: { type: 'string', value: 'DURATION', help: 'it stops working this long from now (30d, 12h, 90m, 3600s; at most 3650d)' }
    },
    run: async ({ values }) => await admin.tokenCreate(values)
  }),
  command({
    name: 'token ls',
    summary: 'the API keys: id, tenant, scopes, created, expires, last used; never a secret (admin)',
    flags: {
      tenant: { type: 'string', value: 'T', help: 'only this tenant\'s keys' },
      json: { type: 'boolean', help: 'one JSON object a key, a line each (times in ms since the epoch)' }
    },
    run: async ({ values }) => await admin.tokenList(values)
  }),
  command({
    name: 'token revoke',
    summary: 'revoke a key by its id: it stops working and its open sessions are closed (admin)',
    args: 'KEY_ID',
    positionals: { min: 1, max: 1 },
    flags: {},
    run: async ({ positionals }) => await admin.tokenRevoke(positionals[0]!)
  }),
  command({
    name: 'token rotate-admin',
    summary: 'a new admin key, printed (and written to the config that held the old one); the old one stops working (admin)',
    details: 'warren up keeps the admin key across restarts (the one its config file holds). Lost it? On the\n' +
      'control plane\'s machine, warren up --rotate-admin-key makes a new one from the data dir.',
    flags: {},
    run: async () => await admin.tokenRotateAdmin()
  }),
  command({
    name: 'quota set',
    summary: 'set a tenant\'s quotas, applied from its next create (admin)',
    args: 'TENANT',
    positionals: { min: 1, max: 1 },
    details: 'Running sandboxes over a lowered --max-sandboxes keep running; the next create is refused\n' +
      '(WARREN_ERR_QUOTA). A tenant not known yet is made, with the defaults for the quotas not given.',
    flags: QUOTA_FLAGS,
    run: async ({ positionals, values }) => await admin.quotaSet(positionals[0], values)
  }),
  command({
    name: 'quota get',
    summary: 'a tenant\'s quotas (admin)',
    args: 'TENANT',
    positionals: { min: 1, max: 1 },
    flags: {},
    run: async ({ positionals }) => await admin.quotaGet(positionals[0])
  }),
  command({
    name: 'quota ls',
    summary: 'every tenant and its quotas (admin)',
    flags: {},
    run: async () => await admin.quotaList()
  }),
  command({
    name: 'tenant ls',
    summary: 'the tenants and their quotas (admin; as warren quota ls)',
    flags: {},
    run: async () => await admin.quotaList()
  }),
  command({
    name: 'tenant quotas',
    summary: 'read or set a tenant\'s quotas (admin; as warren quota get / set)',
    flags: { tenant: { type: 'string', value: 'T', help: 'the tenant (required)' }, ...QUOTA_FLAGS },
    run: async ({ values }) => await admin.quotaGet(values.tenant, values)
  }),
  command({
    name: 'audit',
    summary: 'the audit log: who created, killed, ran, wrote, snapshotted, changed keys and quotas, and how it ended (admin)',
    details: 'The newest records matching, oldest first. e.g. warren audit --tenant team-a --action sandbox --since 1h\n' +
      '--action takes an action (sandbox.create, exec, file.write, token.create, quota.set…) or its group (sandbox, file).',
    flags: {
      tenant: { type: 'string', value: 'T', help: 'only what this tenant\'s keys did' },
      sandbox: { type: 'string', value: 'ID', help: 'only what named this sandbox' },
      action: { type: 'string', value: 'A', help: 'only this action, or group of actions' },
      since: { type: 'string', value: 'DURATION', help: 'only the last DURATION (1h, 30m, 7d)' },
      limit: { type: 'string', value: 'N', help: 'at most N records (100; at most 1000)' },
      json: { type: 'boolean', help: 'JSON lines, one record each' }
    },
    run: async ({ values }) => await audit(values)
  }),
  command({
    name: 'nodes',
    summary: 'the cluster\'s nodes (admin)',
    flags: {},
    run: async () => await commands.nodes()
  }),
  command({
    name: 'image build',
    summary: 'build a layer, push it with its chunk manifest, tag it',
    details: 'Exactly one source: --from-dir, --from-tar, --from-oci or --debootstrap.\n' +
      'e.g. warren image build --kind base --name debian-py:12 --debootstrap bookworm --include python3',
    flags: {
      kind: { type: 'string', value: 'KIND', help: 'base, workspace or tools (base)' },
      name: { type: 'string', value: 'N:T', help: 'the tag to give it (required unless --no-tag)' },
      'from-dir': { type: 'string', value: 'DIR', help: 'a directory tree' },
      'from-tar': { type: 'string', value: 'FILE', help: 'a tar (gzip or not), applied like an image layer' },
      'from-oci': { type: 'string', value: 'FILE', help: 'a container image (docker save or an OCI layout)' },
      platform: { type: 'string', value: 'OS/ARCH', help: 'the image to take from --from-oci (linux/amd64)' },
      debootstrap: { type: 'string', value: 'SUITE', help: 'a Debian suite (bookworm)' },
      include: { type: 'string', value: 'A,B', help: 'packages --debootstrap adds' },
      store: { type: 'string', value: 'BLOBS', help: 'the blob store (default ~/.warren/data/blobs)' },
      'no-tag': { type: 'boolean', help: 'push only; print the digest' }
    },
    run: async ({ values }) => await image.imageBuild(values)
  }),
  command({
    name: 'image ls',
    summary: 'the image names and their digests',
    flags: {},
    run: async () => await image.imageList()
  }),
  command({
    name: 'sim',
    summary: 'simulate a cluster under a DSec-shaped workload (the real placement code)',
    details: 'e.g. warren sim --nodes 160 --cores-per-node 187 --mem-per-node 1.5TiB --duration 24h --seed 1 --report out.html',
    flags: {
      nodes: { type: 'string', value: 'N', help: 'nodes of the cluster' },
      ...SIM_CLUSTER_FLAGS,
      profile: { type: 'string', value: 'P', help: 'the workload (dsec, the only one)' },
      trace: { type: 'string', value: 'F.jsonl', help: 'replay a JSONL trace of create/kill events instead' },
      shards: { type: 'string', value: 'K', help: 'shards of the directory' },
      'shard-crashes-per-day': { type: 'string', value: 'N', help: 'shard restarts a day' },
      'heartbeat-timeout': { type: 'string', value: 'DURATION', help: 'how long a silent node is trusted (30s)' }
    },
    run: async ({ values }) => await sim.sim(values)
  }),
  command({
    name: 'sim plan',
    summary: 'the smallest node count that meets the targets',
    flags: {
      'target-concurrent': { type: 'string', value: 'N', help: 'sandboxes running at once (required)' },
      'target-rate': { type: 'string', value: 'R', help: 'creations a second in bursts (required)' },
      'p99-create-ms': { type: 'string', value: 'P', help: 'create latency p99 to stay under (required)' },
      ...SIM_CLUSTER_FLAGS
    },
    run: async ({ values }) => await sim.plan(values)
  }),
  command({
    name: 'sim calibrate',
    summary: '300 creations on this cluster and in the simulator, compared (admin)',
    flags: {
      seed: { type: 'string', value: 'S', help: 'seed of the scenario' },
      shards: { type: 'string', value: 'K', help: 'shards the simulator assumes' }
    },
    run: async ({ values }) => await sim.calibrate(values)
  })
]
