/**
 * The `warren` command.
 *
 *   warren up [--port 7100] [--host 127.0.0.1] [--data-dir DIR] [--functions-dir DIR]
 *   warren node --join URL --token JOIN_TOKEN [--node-id ID]
 *   warren run [--backend function] [--ttl MS] [--label k=v] -- CMD…
 *   warren ps [--label k=v] [--state S] [--all]
 *   warren exec ID -- CMD…
 *   warren log ID
 *   warren kill ID…
 *   warren token create --tenant T [--scopes a,b]
 *   warren tenant ls | tenant quotas --tenant T [--max-sandboxes N] [--creates-per-second R] [--create-burst B]
 *   warren nodes
 */
import { parseArgs } from 'node:util'
import { isWarrenError } from '../errors.js'
import * as commands from './commands.js'
import * as image from './image.js'
import * as sim from './sim.js'
import * as servers from './servers.js'

const USAGE = `usage: warren <command>
  up [--port 7100] [--host 127.0.0.1] [--data-dir DIR] [--functions-dir DIR] [--no-local-node] [--no-lazy-layers]
                                     control plane + a local node in one process
  node --join URL --token T [--no-lazy-layers] [--egress-host NAME=ADDR:PORT]…
                                     join a control plane as a node (layers load on demand unless told not to;
                                     an egress host is an inside address:port sandboxes may reach by that name)
  run [--backend B] [--image N:T | --image-dir D [--store BLOBS]] [--ttl MS] -- CMD…
                                     create, run, stream output, exit with its code, kill
  ps [--label k=v] [--state S] [--all]
                                     list your live sandboxes (--all: ended ones too)
  exec ID -- CMD…                    run a command in a sandbox
  log ID                             what was run in a sandbox (its trajectory)
  kill ID…                           end sandboxes
  token create --tenant T [--scopes a,b]   issue an API key (admin)
  tenant ls                          the tenants and their quotas (admin)
  tenant quotas --tenant T [--max-sandboxes N] [--creates-per-second R] [--create-burst B]
                                     read or set a tenant's quotas (admin)
  nodes                              the cluster's nodes (admin)
  image build --kind base|workspace|tools --name N:T (--from-dir D | --from-tar F | --from-oci F [--platform os/arch] | --debootstrap SUITE [--include a,b]) [--store BLOBS]
                                     build a layer, push it with its chunk manifest, tag it
  image ls                           the image names and their digests
  sim [--nodes N] [--cores-per-node C] [--mem-per-node 1.5TiB] [--duration 24h] [--seed S] [--report F.html] [--json F]
                                     simulate a cluster under a DSec-shaped workload (the real placement code)
  sim --trace F.jsonl [--nodes N] …  replay a JSONL trace of create/kill events instead
  sim … [--shards K] [--node-crashes-per-day N] [--shard-crashes-per-day N] [--heartbeat-timeout 30s]
                                     failures: nodes fall silent until the registry notices, shards restart
  sim plan --target-concurrent N --target-rate R --p99-create-ms P [--duration 2h] [--seed S] [--cores-per-node C] [--mem-per-node M]
                                     the smallest node count that meets the targets
  sim calibrate [--seed S] [--shards K]   300 creations on this cluster and in the simulator, compared (admin)
`

/** Splits `args` at `--`: flags before, the command after. */
function splitCommand (args: string[]): [string[], string[]] {
  const i = args.indexOf('--')
  return i < 0 ? [args, []] : [args.slice(0, i), args.slice(i + 1)]
}

export async function main (argv: string[]): Promise<number> {
  const [command, ...rest] = argv
  const [before, cmd] = splitCommand(rest)
  const parse = <T extends Record<string, { type: 'string' | 'boolean', multiple?: boolean }>>(options: T) =>
    parseArgs({ args: before, options, allowPositionals: true, strict: true })
  try {
    switch (command) {
      case 'up': {
        const { values } = parse({ port: { type: 'string' }, host: { type: 'string' }, 'data-dir': { type: 'string' }, 'functions-dir': { type: 'string' }, shards: { type: 'string' }, 'no-local-node': { type: 'boolean' }, 'lazy-layers': { type: 'boolean' }, 'no-lazy-layers': { type: 'boolean' } })
        return await servers.up(values)
      }
      case 'node': {
        const { values } = parse({ join: { type: 'string' }, token: { type: 'string' }, 'node-id': { type: 'string' }, 'data-dir': { type: 'string' }, 'functions-dir': { type: 'string' }, 'lazy-layers': { type: 'boolean' }, 'no-lazy-layers': { type: 'boolean' }, 'egress-host': { type: 'string', multiple: true } })
        return await servers.node(values)
      }
      case 'run': {
        const { values } = parse({ backend: { type: 'string' }, ttl: { type: 'string' }, label: { type: 'string', multiple: true }, image: { type: 'string' }, workspace: { type: 'string' }, tools: { type: 'string' }, 'image-dir': { type: 'string' }, store: { type: 'string' } })
        return await commands.run(cmd, values)
      }
      case 'ps': {
        const { values } = parse({ label: { type: 'string', multiple: true }, state: { type: 'string' }, all: { type: 'boolean' } })
        return await commands.ps(values)
      }
      case 'exec': {
        const { positionals } = parse({})
        return await commands.exec(positionals[0], cmd)
      }
      case 'log': {
        const { positionals } = parse({})
        return await commands.log(positionals[0])
      }
      case 'kill': {
        const { positionals } = parse({})
        return await commands.kill(positionals)
      }
      case 'token': {
        const { values, positionals } = parse({ tenant: { type: 'string' }, scopes: { type: 'string' } })
        if (positionals[0] !== 'create') break
        return await commands.tokenCreate(values)
      }
      case 'tenant': {
        const { values, positionals } = parse({ tenant: { type: 'string' }, 'max-sandboxes': { type: 'string' }, 'creates-per-second': { type: 'string' }, 'create-burst': { type: 'string' } })
        if (positionals[0] === 'ls' && positionals.length === 1) return await commands.tenantList()
        if (positionals[0] === 'quotas' && positionals.length === 1) return await commands.tenantQuotas(values)
        break
      }
      case 'nodes':
        return await commands.nodes()
      case 'sim': {
        const { values, positionals } = parse({
          nodes: { type: 'string' }, 'cores-per-node': { type: 'string' }, 'mem-per-node': { type: 'string' }, duration: { type: 'string' },
          seed: { type: 'string' }, report: { type: 'string' }, json: { type: 'string' }, profile: { type: 'string' }, trace: { type: 'string' },
          'target-concurrent': { type: 'string' }, 'target-rate': { type: 'string' }, 'p99-create-ms': { type: 'string' }, shards: { type: 'string' },
          'node-crashes-per-day': { type: 'string' }, 'shard-crashes-per-day': { type: 'string' }, 'heartbeat-timeout': { type: 'string' }
        })
        if (positionals[0] === 'plan' && positionals.length === 1) return await sim.plan(values)
        if (positionals[0] === 'calibrate' && positionals.length === 1) return await sim.calibrate(values)
        if (positionals.length > 0) break
        return await sim.sim(values)
      }
      case 'image': {
        const { values, positionals } = parse({
          kind: { type: 'string' }, name: { type: 'string' }, 'from-dir': { type: 'string' }, 'from-tar': { type: 'string' },
          'from-oci': { type: 'string' }, platform: { type: 'string' }, debootstrap: { type: 'string' }, include: { type: 'string' }, store: { type: 'string' }, 'no-tag': { type: 'boolean' }
        })
        if (positionals[0] === 'build') return await image.imageBuild(values)
        if (positionals[0] === 'ls') return await image.imageList()
        break
      }
      case undefined: case 'help': case '--help': case '-h':
        process.stdout.write(USAGE)
        return 0
    }
    process.stderr.write(USAGE)
    return 2
  } catch (err) {
    const code = isWarrenError(err) ? `${err.code}: ` : ''
    process.stderr.write(`warren: ${code}${err instanceof Error ? err.message : String(err)}\n`)
    return isWarrenError(err) ? 1 : 2
  }
}
