/**
 * Entry of a `js` child process (started by `child.ts`; argv[2] is the node's pid, or 0 in the
 * jail, which itself ends the child with the node). It runs one
 * call at a time in the vm sandbox of `run-js.ts`, streams the call's output to the node over
 * the IPC channel, and answers `done`. Whatever kills it (the V8 heap limit, a SIGKILL at a
 * timeout) kills only this process; the node reports the call and starts another child.
 *
 * It dies with the node: on disconnect when idle, through the orphan watch when busy.
 */
import type { ChildMessage, RunMessage } from './protocol.js'
import { isRunMessage } from './protocol.js'
import { openChildIo } from './child-io.js'
import { exitWithParent } from './orphan-watch.js'
import { runJs, type JsOutcome } from './run-js.js'
import { routeUnhandledRejections, withCallRejections } from '../rejections.js'

/** Exit code of a child that cannot go on (no IPC channel, a broken call handler). */
const EXIT_SOFTWARE = 70

if (typeof process.send !== 'function') {
  process.stderr.write('warren: js child: started without an IPC channel\n')
  process.exit(EXIT_SOFTWARE)
}
const parentPid = Number(process.argv[2])
if (!Number.isInteger(parentPid) || parentPid < 0) {
  process.stderr.write('warren: js child: no parent pid given\n')
  process.exit(EXIT_SOFTWARE)
}
if (parentPid > 0) exitWithParent(parentPid)
process.on('disconnect', () => process.exit(0))

const sendRaw = process.send.bind(process)
/** Posts to the node; a closed channel only means the node is going, which the watch handles. */
function send (msg: ChildMessage): void {
  try { sendRaw(msg, undefined, undefined, () => {}) } catch {}
}

routeUnhandledRejections()

let busy = false

process.on('message', (msg: unknown) => {
  // The node sends one call at a time; anything else is a bug there, not something to run.
  if (busy || !isRunMessage(msg)) return
  busy = true
  handle(msg).then(() => { busy = false }, (err: unknown) => {
    // runJs does not throw; if it does, the call's state is unknown: end the process, which the
    // node reports as a crash of this call.
    process.stderr.write(`warren: js child: ${err instanceof Error ? err.message : String(err)}\n`)
    process.exit(EXIT_SOFTWARE)
  })
})

async function handle (msg: RunMessage): Promise<void> {
  const io = openChildIo(msg.id, msg.maxOutputBytes, send)
  let outcome: JsOutcome
  try {
    outcome = await withCallRejections((rejections) => runJs(msg, io, rejections))
  } finally {
    io.close()
  }
  send({ t: 'done', id: msg.id, exitCode: outcome.exitCode, truncated: io.truncated, timedOut: outcome.timedOut })
}

send({ t: 'ready' })
