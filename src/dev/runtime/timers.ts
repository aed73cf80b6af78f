/**
 * Every timer of one simulated runtime, unref'd so a test process can exit, and cleared together on close.
 */
export class TimerSet {
  private readonly pending = new Set<NodeJS.Timeout>()
  private closed = false

  /** Runs `fn` once after `ms`; returns a cancel function. A no-op once the set is closed. */
  after(ms: number, fn: () => void): () => void {
    if (this.closed) return () => {}
    const handle = setTimeout(() => {
      this.pending.delete(handle)
      fn()
    }, ms)
    handle.unref()
    this.pending.add(handle)
    return () => {
      clearTimeout(handle)
      this.pending.delete(handle)
    }
  }

  /** Runs `fn` every `ms` until cancelled or closed. */
  every(ms: number, fn: () => void): () => void {
    if (this.closed) return () => {}
    const handle = setInterval(fn, ms)
    handle.unref()
    this.pending.add(handle)
    return () => {
      clearInterval(handle)
      this.pending.delete(handle)
    }
  }

  /** Clears every timer; later `after`/`every` calls do nothing. */
  close(): void {
    this.closed = true
    for (const handle of this.pending) clearTimeout(handle)
    this.pending.clear()
  }
}
