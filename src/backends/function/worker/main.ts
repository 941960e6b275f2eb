/**
 * A function worker (loaded by `entry.cts`, piscina's `filename`). At start it imports the
 * preload modules and tells the supervisor it is ready; then piscina hands it one call at a
 * time (concurrentTasksPerWorker 1), so whatever goes wrong in the worker belongs to that call.
 * It runs function modules only: untrusted `js` runs in child processes (see js/).
 */
import { parentPort, workerData } from 'node:worker_threads'
import { ExitCodes } from '../exit-codes.js'
import { READY_MESSAGE, type WorkerBootData, type WorkerReply, type WorkerTask } from '../protocol.js'
import { openCallIo } from './io.js'
import { runModule } from './run-module.js'
import { routeUnhandledRejections, withCallRejections } from '../rejections.js'

const boot = workerData as WorkerBootData

// A preload that throws fails the worker's start; the supervisor counts that as a start failure.
for (const url of boot.preload) await import(url)
parentPort?.postMessage(READY_MESSAGE)

routeUnhandledRejections()

/** Runs one call (the piscina task handler). */
export default async function handleCall (task: WorkerTask): Promise<WorkerReply> {
  const io = openCallIo(task.port, task.maxOutputBytes)
  try {
    return await withCallRejections(async (rejections) => {
      if (task.op === 'module') return { exitCode: await runModule(task, io, rejections), truncated: io.truncated }
      io.stderr.write(`warren: unknown task ${JSON.stringify((task as { op?: unknown }).op)}\n`)
      return { exitCode: ExitCodes.CANNOT_EXECUTE, truncated: io.truncated }
    })
  } finally {
    io.close()
  }
}
