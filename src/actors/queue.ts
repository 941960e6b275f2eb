/**
 * A growable ring buffer: O(1) push and shift without the O(n) `Array#shift` of a plain array.
 * Mailboxes and the run queue are built on it.
 */
export class Queue<T> {
  private items: Array<T | undefined>
  private head = 0
  private size = 0

  constructor (initialCapacity = 4) {
    this.items = new Array(initialCapacity)
  }

  /** Number of items queued. */
  get length (): number { return this.size }

  /** Appends an item at the tail. */
  push (item: T): void {
    if (this.size === this.items.length) this.grow()
    this.items[(this.head + this.size) % this.items.length] = item
    this.size++
  }

  /** Removes and returns the item at the head, or undefined when empty. */
  shift (): T | undefined {
    if (this.size === 0) return undefined
    const item = this.items[this.head]
    this.items[this.head] = undefined
    this.head = (this.head + 1) % this.items.length
    this.size--
    return item
  }

  /** Removes every item and returns them in order. */
  drain (): T[] {
    const out: T[] = []
    for (let item = this.shift(); item !== undefined; item = this.shift()) out.push(item)
    return out
  }

  private grow (): void {
    const next = new Array<T | undefined>(this.items.length * 2)
    for (let i = 0; i < this.size; i++) next[i] = this.items[(this.head + i) % this.items.length]
    this.items = next
    this.head = 0
  }
}
