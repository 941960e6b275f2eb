/**
 * Commands that outlive their node agent: on a backend with `resumableExecs` every command is
 * started resumable under its exec id, and what its consumer acknowledges (`ExecOutput.onAck`)
 * is passed on, so the sandbox keeps only output nobody has for good. After a node restart the
 * sandbox actor takes the command up again (`Backend.reattach`) and its consumer's pulls go on
 * from their last seq (docs/design.md, "Sandboxes outlive their node agent").
 */
import type { Backend, ExecOptions } from '../../backends/types.js'
import { createError, ErrorCodes } from '../../errors.js'
import type { ExecRecording } from '../trajectory/index.js'
import type { ExecOutput } from './exec-output.js'

export const ResumeDefaults = {
  /** The longest tag the sandbox's agent keeps (agent/protocol.h WARREN_MAX_TAG): longer ids are not resumable. */
  maxTagBytes: 64
}

/**
 * The `resume` option of a command with id `execId` whose output goes to `output`: empty when
 * the backend cannot resume commands (or the id is too long to be its tag).
 */
export function resumeOf (backend: Backend, execId: string, output: ExecOutput): Pick<ExecOptions, 'resume'> {
  if (backend.resumableExecs !== true || Buffer.byteLength(execId) > ResumeDefaults.maxTagBytes) return {}
  return { resume: { tag: execId, onAck: (ack) => output.onAck(ack) } }
}

/**
 * A command taken up after a node restart keeps running and streaming, but what its old node held
 * of its stdin and terminal is gone: writes and resizes are refused, saying so.
 * @throws WARREN_ERR_UNSUPPORTED naming the option
 */
export function refuseResumed (execId: string, field: 'openStdin' | 'pty'): never {
  throw createError(ErrorCodes.UNSUPPORTED, `command ${execId} was taken up after a node restart: its ${field === 'pty' ? 'terminal cannot be resized' : 'stdin takes no more writes'}`, { field, execId })
}

/**
 * A command's output callbacks: each chunk to its output (where its consumer pulls it), then to
 * its step with the output seqs it took, so a resumable command's journal can be cut where its
 * consumer was (trajectory/output-journal.ts).
 */
export function outputHandlers (output: ExecOutput, record: ExecRecording): Pick<ExecOptions, 'onStdout' | 'onStderr'> {
  const to = (stream: 'stdout' | 'stderr') => (chunk: Uint8Array): void => {
    const first = output.seq
    output.append(stream, chunk)
    record.output(stream, chunk, { first, end: output.seq })
  }
  return { onStdout: to('stdout'), onStderr: to('stderr') }
}
