/**
 * A node agent stand-in for the adopt test, run as its own process so it can be killed with
 * SIGKILL: with the backend's defaults (templates, the warm pool) makes a VM on the given data
 * dir, leaves a file and a background process in it, starts a resumable command printing numbered
 * lines (its output read and not acknowledged), makes a second VM and pauses it, prints the first
 * VM as JSON once the command has printed its first lines, then waits to be killed.
 *
 *   node adopt-child.js DATA_DIR RUN_DIR CGROUP_PARENT GUEST_DIR
 */
import { createCgroupProvider } from '../../../src/backends/container/index.js'
import { createMicrovmBackend } from '../../../src/backends/microvm/index.js'

const [dataDir, runDir, parent, guestDir] = process.argv.slice(2)
const b = createMicrovmBackend({ dataDir: dataDir!, runDir: runDir!, guestDir: guestDir!, cgroups: createCgroupProvider(parent!) })
const h = await b.create({ id: 'adoptee', limits: { cpus: 1, memoryMiB: 192, diskMiB: 16, pids: 64 }, meta: { who: 'the first agent' } })
await b.files.write(h, '/root/note', new TextEncoder().encode('written before the crash'))
await b.exec(h, ['sh', '-c', 'sleep 1000 >/dev/null 2>&1 &'])
// 400 numbered lines, 10 ms apart: under way when this agent is killed, ended long before the test reads it.
let seen = ''
const firstLines = new Promise<void>((resolve) => {
  void b.exec(h, ['sh', '-c', 'i=0; while [ $i -lt 400 ]; do echo "line $i"; i=$((i+1)); sleep 0.01; done'], {
    resume: { tag: 'numbers', onAck: () => {} },
    onStdout: (c) => { seen += new TextDecoder().decode(c); if (seen.includes('line 20\n')) resolve() }
  })
})
await firstLines
const sleeper = await b.create({ id: 'sleeper', limits: { cpus: 1, memoryMiB: 192, diskMiB: 16, pids: 64 }, meta: { who: 'paused' } })
// A resumable command under way when it is paused: its frozen agent cannot list it at adopt.
let counted = ''
await new Promise<void>((resolve) => {
  void b.exec(sleeper, ['sh', '-c', 'i=0; while [ $i -lt 100 ]; do echo "n $i"; i=$((i+1)); sleep 0.01; done'], {
    resume: { tag: 'count', onAck: () => {} },
    onStdout: (c) => { counted += new TextDecoder().decode(c); if (counted.includes('n 5\n')) resolve() }
  })
})
await b.pause!(sleeper)
process.stdout.write(JSON.stringify(b.vm(h)) + '\n')
setInterval(() => {}, 60_000)
