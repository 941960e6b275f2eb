/**
 * A resumable command's output as its step has recorded it so far, kept on the node's disk beside
 * its sandbox's log, so that an agent restarted mid-command records the whole output when it takes
 * the command up — not only what came after the restart (what came before was in the old agent's
 * memory). Frames (codec.ts, length-prefixed msgpack): `{ s, e, o, d }`, the chunk's output seqs
 * [s, e) (ExecOutput numbers pieces of at most 64 KiB; a resumable backend's chunks are one each),
 * its stream and bytes. Taken up from `fromSeq` (what its consumer had), the journal keeps the
 * chunks wholly below it and goes on from there: the output the agent sends again comes once.
 *
 * Bounded: past `maxBytes` of output a `{ cut: true }` frame ends it, and a step taken up from a
 * cut journal starts from the restart, as without one. Removed once its step is final.
 */
import { closeSync, openSync, readFileSync, rmSync, truncateSync, writeSync } from 'node:fs'
import { decodeValue, frameValue, LENGTH_BYTES, splitRecords } from './codec.js'

type Frame = { s: number, e: number, o: 1 | 2, d: Uint8Array } | { cut: true }

/** What a journal read back gives its step. */
export interface JournaledOutput {
  stream: 'stdout' | 'stderr'
  data: Uint8Array
}

/** The output seqs a chunk took: [first, end). */
export interface OutputSeqs { first: number, end: number }

export class OutputJournal {
  private fd: number | undefined
  private written: number
  private cut: boolean

  private constructor (private readonly path: string, private readonly maxBytes: number, written: number, cut: boolean) {
    this.written = written
    this.cut = cut
  }

  /** A new journal at `path` (the file is made at the first chunk). */
  static create (path: string, maxBytes: number): OutputJournal {
    return new OutputJournal(path, maxBytes, 0, false)
  }

  /**
   * The journal a previous agent left at `path`, cut back to the chunks below `fromSeq`.
   * @returns the journal (appending from there) and what it held below `fromSeq`; none when it
   *   was cut by its bound or is missing
   */
  static reopen (path: string, fromSeq: number, maxBytes: number): { journal: OutputJournal, kept: JournaledOutput[] | undefined } {
    let bytes: Buffer
    try { bytes = readFileSync(path) } catch { return { journal: OutputJournal.create(path, maxBytes), kept: undefined } }
    const kept: JournaledOutput[] = []
    let end = 0
    let written = 0
    for (const body of splitRecords(bytes).bodies) {
      const f = decodeValue<Frame>(body)
      if ('cut' in f) { rmSync(path, { force: true }); return { journal: new OutputJournal(path, maxBytes, maxBytes, true), kept: undefined } }
      if (f.e > fromSeq) break
      kept.push({ stream: f.o === 1 ? 'stdout' : 'stderr', data: f.d })
      written += f.d.length
      end += LENGTH_BYTES + body.length
    }
    truncateSync(path, end)
    return { journal: new OutputJournal(path, maxBytes, written, false), kept }
  }

  /** Appends a chunk of output and the seqs it took. Past the bound, a cut ends the journal. */
  write (seqs: OutputSeqs, stream: 'stdout' | 'stderr', data: Uint8Array): void {
    if (this.cut || data.length === 0) return
    try {
      this.fd ??= openSync(this.path, 'a', 0o600)
      if (this.written + data.length > this.maxBytes) {
        this.cut = true
        writeSync(this.fd, frameValue({ cut: true }).framed)
        return
      }
      writeSync(this.fd, frameValue({ s: seqs.first, e: seqs.end, o: stream === 'stdout' ? 1 : 2, d: data }).framed)
      this.written += data.length
    } catch {
      this.cut = true // the disk refused: the step goes on without a journal
    }
  }

  /** The step is final: the journal goes. */
  remove (): void {
    this.cut = true
    if (this.fd !== undefined) { try { closeSync(this.fd) } catch { /* closed */ } this.fd = undefined }
    rmSync(this.path, { force: true })
  }
}
