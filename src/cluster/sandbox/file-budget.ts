/**
 * The node's memory for chunks that arrived ahead of a gap in their upload. Such a chunk is kept
 * until the gap fills (the sha256 goes in order), in the node's memory rather than the sandbox's,
 * so all the uploads of a node share one bound (`FilesDefaults.nodeAheadBytes`): without it, each
 * sandbox's uploads could hold their windows for as long as they kept the gaps open.
 */
export class AheadBudget {
  private used = 0

  /** @param capacity bytes all uploads sharing this budget may hold ahead of their gaps together */
  constructor (readonly capacity: number) {}

  /** Bytes held now. */
  get held (): number { return this.used }

  /**
   * Sets `bytes` aside for a chunk held ahead.
   * @returns false (and sets nothing aside) when that would pass the capacity
   */
  take (bytes: number): boolean {
    if (this.used + bytes > this.capacity) return false
    this.used += bytes
    return true
  }

  /** Gives back what `take` set aside (a chunk joined the bytes in order, or its upload ended). */
  give (bytes: number): void {
    this.used = Math.max(0, this.used - bytes)
  }
}
