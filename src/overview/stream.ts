import type { Socket } from 'node:net'
import type { Operator } from '../auth/operator.ts'
import { type HeartbeatTarget, PING_FRAME, streamHead } from '../events/sse.ts'

/** Why an overview stream ended. */
export type OverviewEnd = 'client_gone' | 'slow_consumer' | 'revoked' | 'shutdown'

/** How long an ended stream waits for the client to close its side before the socket is destroyed. */
const END_GRACE_MS = 10_000

/**
 * One person's overview: an SSE stream on a taken-over socket that gets the frames the hub prepared for the
 * sessions this person may see. A client that lets more than `maxQueuedBytes` pile up is cut off; it
 * reconnects and gets a fresh snapshot (the overview has no history to lose).
 */
export class OverviewStream implements HeartbeatTarget {
  readonly operator: Operator
  /** The sessions whose frames this stream gets (those the operator may see). */
  readonly sessions = new Set<string>()
  readonly #socket: Socket
  readonly #maxQueuedBytes: number
  readonly #onEnd: (stream: OverviewStream, why: OverviewEnd) => void
  #ended = false
  #why: OverviewEnd = 'client_gone'

  constructor(
    socket: Socket,
    operator: Operator,
    requestId: string,
    maxQueuedBytes: number,
    onEnd: (stream: OverviewStream, why: OverviewEnd) => void,
  ) {
    this.operator = operator
    this.#socket = socket
    this.#maxQueuedBytes = maxQueuedBytes
    this.#onEnd = onEnd
    socket.setNoDelay(true)
    socket.setTimeout(0)
    socket.on('error', () => {})
    socket.on('close', () => this.#onEnd(this, this.#why))
    // A client's FIN alone would leave a half-open socket counted until the next write failed.
    socket.on('end', () => socket.destroy())
    socket.write(streamHead(requestId))
  }

  get ended(): boolean {
    return this.#ended
  }

  /** Writes a prepared frame (shared with every other stream: never modified). */
  send(frame: Buffer): void {
    if (this.#ended) return
    if (this.#socket.writableLength > this.#maxQueuedBytes) {
      this.#why = 'slow_consumer'
      this.destroy()
      return
    }
    this.#socket.write(frame)
  }

  /** Several frames in one write (the first snapshot). */
  sendAll(frames: readonly Buffer[]): void {
    if (frames.length > 0) this.send(frames.length === 1 ? (frames[0] as Buffer) : Buffer.concat(frames))
  }

  ping(): void {
    this.send(PING_FRAME)
  }

  /** Ends cleanly (FIN after what is written); the client reconnects. */
  end(why: OverviewEnd): void {
    if (this.#ended) return
    this.#ended = true
    this.#why = why
    this.#socket.end()
    setTimeout(() => this.#socket.destroy(), END_GRACE_MS).unref()
  }

  destroy(): void {
    this.#ended = true
    this.#socket.destroy()
  }
}
