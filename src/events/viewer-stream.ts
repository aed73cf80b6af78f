import type { Socket } from 'node:net'
import type { FastifyBaseLogger } from 'fastify'
import type { Operator } from '../auth/operator.ts'
import type { Delivery, StreamPosition, Subscriber, Subscription } from './bus.ts'
import type { EventMetrics } from './metrics.ts'
import { MAX_WRITE_BYTES, type PreparedBatch } from './prepared-batch.ts'
import { PING_FRAME, runComment, streamHead } from './sse.ts'

/** How long an ended stream waits for the client to close its side before the socket is destroyed. */
const END_GRACE_MS = 10_000

/** Why a viewer stream ended (for logs and the coordinator). */
export type ViewerEnd = 'closed_run' | 'client_gone' | 'slow_consumer' | 'revoked' | 'shutdown' | 'removed'

/** The coordinator a viewer reports to: one object for all viewers (no per-viewer closures). */
export interface ViewerOwner {
  /** Fills the viewer's run events `from`..`to` from the trace; null when it cannot. */
  fillGap(viewer: ViewerStream, run: string, from: number, to: number): Promise<Delivery[] | null>
  /** Called once, when the viewer's socket is gone: free its bookkeeping. */
  viewerEnded(viewer: ViewerStream, why: ViewerEnd): void
}

/** What every {@link ViewerStream} of a coordinator shares. */
export interface ViewerShared {
  readonly maxQueuedBytes: number
  readonly metrics: EventMetrics
  readonly log: FastifyBaseLogger
  readonly owner: ViewerOwner
}

const VIEWER = Symbol('viewer')
type ViewerSocket = Socket & { [VIEWER]?: ViewerStream }

// Frames a viewer receives in a turn are queued, and every dirty viewer is written once at the end of the
// turn (setImmediate runs after the I/O phase that delivered them): one write call per viewer per turn.
// Two lists swapped at each flush, so no array is allocated per turn.
let dirty: ViewerStream[] = []
let flushing: ViewerStream[] = []
let flushScheduled = false

function flushDirty(): void {
  flushScheduled = false
  // A flush can re-mark a viewer (drain); those go to the next turn's list.
  const viewers = dirty
  dirty = flushing
  flushing = viewers
  for (let i = 0; i < viewers.length; i++) (viewers[i] as ViewerStream).flush()
  viewers.length = 0
}

/**
 * One viewer's event stream over a hijacked socket. Frames are the bus's shared buffers, queued and
 * written once per event-loop turn; a viewer whose unwritten live bytes (queued here and in the socket)
 * pass `maxQueuedBytes` is disconnected rather than buffered without limit, and catches up from the
 * buffer when it reconnects with `Last-Event-ID`. Replayed bytes are paced by `drain` and do not count:
 * the bus holds them anyway.
 */
export class ViewerStream implements Subscriber {
  readonly kasmId: string
  readonly operator: Operator
  /** The position the viewer asked for (the run a gap is filled for). */
  readonly position: StreamPosition
  readonly #shared: ViewerShared
  readonly #socket: ViewerSocket
  /** The only pending buffer, when there is just one (the usual case: no array is touched). */
  #single: Buffer | null = null
  #queue: Buffer[] = []
  #queueHead = 0
  /** Live bytes in #queue (replayed ones are not counted). */
  #liveQueued = 0
  /** Replayed bytes at the front of #queue, written before any live byte. */
  #replayQueued = 0
  /** The run of the last frame queued: a frame of another run is preceded by `: run <id>`. */
  #run: string | undefined
  /** A gap fill is in flight: nothing after #holdAt is written until it is in place. */
  #holding = false
  #holdAt = 0
  #dirty = false
  #awaitingDrain = false
  /** A `closed` was queued, or the stream is ending: end it once the queue is written. */
  #closing = false
  #ended = false
  #endReason: ViewerEnd = 'client_gone'
  #subscription: Subscription | null = null
  #endTimer: NodeJS.Timeout | null = null

  // Shared listeners: a closure per viewer would cost more than the rest of an idle viewer's state.
  static readonly #onClose = function (this: ViewerSocket): void {
    const viewer = this[VIEWER]
    if (viewer !== undefined) viewer.#gone()
  }
  static readonly #onEnd = function (this: ViewerSocket): void {
    this.destroy()
  }
  static readonly #onDrain = function (this: ViewerSocket): void {
    const viewer = this[VIEWER]
    if (viewer === undefined) return
    viewer.#awaitingDrain = false
    viewer.#markDirty()
  }

  constructor(
    shared: ViewerShared,
    socket: Socket,
    kasmId: string,
    operator: Operator,
    position: StreamPosition,
    requestId: string,
  ) {
    this.#shared = shared
    this.#socket = socket
    this.kasmId = kasmId
    this.operator = operator
    this.position = position
    this.#socket[VIEWER] = this
    socket.setNoDelay(true)
    socket.setTimeout(0)
    socket.on('error', noop)
    socket.on('close', ViewerStream.#onClose)
    // HTTP sockets allow half-open connections: a viewer's FIN alone would not close the socket until the
    // next write failed, keeping a departed viewer counted (and in presence) until the next ping.
    socket.on('end', ViewerStream.#onEnd)
    // Queued, not written: the head and the replay leave in one write at the end of this turn.
    this.#enqueue(streamHead(requestId), true)
    this.#markDirty()
  }

  /** Whether the stream has ended (or is ending). */
  get ended(): boolean {
    return this.#ended
  }

  /** Bytes not yet handed to the kernel (ours and the socket's), for tests and the slow-consumer rule. */
  get queuedBytes(): number {
    return this.#liveQueued + this.#replayQueued + this.#socket.writableLength
  }

  /**
   * Hands over the bus subscription (it may have delivered already); closed at once if the stream ended. A
   * stream that got nothing to replay opens with `: run <id>` now, as the runtime's does, not at the next event.
   */
  attach(subscription: Subscription): void {
    if (this.#ended) {
      subscription.close()
      return
    }
    this.#subscription = subscription
    if (this.#run === undefined && subscription.servedRun !== null) {
      this.#run = subscription.servedRun
      this.#enqueue(runComment(subscription.servedRun), true)
      this.#markDirty()
    }
  }

  deliver(batch: readonly Delivery[], replay: boolean, prepared: PreparedBatch): void {
    if (this.#ended || this.#closing) return
    // The backlog is what earlier turns left unwritten (here, or in the socket because the kernel would not
    // take it). Bytes of this turn are not counted: a burst that arrives in one turn is one write, and a
    // viewer that reads keeps up with it.
    if (
      !replay &&
      !this.#dirty &&
      this.#liveQueued + this.#socket.writableLength > this.#shared.maxQueuedBytes
    ) {
      this.#dropSlow()
      return
    }
    if (prepared.run !== null && prepared.run === this.#run) {
      this.#enqueue(prepared.bytes, replay)
    } else {
      // A run starts (or the stream opens, or closes) inside this batch: per-frame, with `: run` lines.
      for (const d of batch) {
        if (d.message.run !== this.#run) {
          this.#run = d.message.run
          this.#enqueue(runComment(d.message.run), replay)
        }
        this.#enqueue(d.frame, replay)
        if (d.message.kind === 'closed') {
          this.#closing = true
          this.#endReason = 'closed_run'
          this.#armEndTimer()
          this.#unsubscribe()
          break
        }
      }
    }
    this.#shared.metrics.countDeliveries(prepared.events)
    this.#markDirty()
  }

  /** The run became known with nothing to deliver (a cold session, a stream at its current position). */
  served(run: string): void {
    if (this.#ended || this.#closing || this.#run !== undefined) return
    this.#run = run
    this.#enqueue(runComment(run), true)
    this.#markDirty()
  }

  gap(from: number, to: number): void {
    const run = this.position.run
    if (this.#ended || run === undefined) return
    if (this.#run !== run) {
      this.#run = run
      this.#enqueue(runComment(run), true)
    }
    this.#spill()
    this.#holding = true
    this.#holdAt = this.#queue.length
    this.#shared.owner.fillGap(this, run, from, to).then(
      (filled) => this.#placeFill(run, from, to, filled),
      () => this.#placeFill(run, from, to, null),
    )
  }

  /** `: ping`, unless bytes are waiting anyway. Called by the shared heartbeat. */
  ping(): void {
    // Not before the subscription is attached: the first line of a stream is its `: run`.
    if (this.#ended || this.#holding || this.#subscription === null || this.#pending()) return
    this.#enqueue(PING_FRAME, true)
    this.#markDirty()
  }

  /**
   * Ends the stream cleanly: what is queued is written, then FIN, so the client reconnects at once. A client
   * that does not read or close within {@link END_GRACE_MS} is cut off.
   */
  end(why: ViewerEnd): void {
    if (this.#ended) return
    this.#endReason = why
    this.#unsubscribe()
    if (this.#pending() && !this.#holding) {
      this.#closing = true
      this.#armEndTimer()
      this.#markDirty()
      return
    }
    this.#finish()
  }

  /** Drops the connection at once (a shutdown whose grace has passed). */
  destroy(): void {
    this.#ended = true
    this.#unsubscribe()
    this.#socket.destroy()
  }

  /**
   * Writes what is queued (up to a gap being filled), one write per call when it fits; waits for `drain`
   * when the socket is full.
   */
  flush(): void {
    this.#dirty = false
    const socket = this.#socket
    if (socket.destroyed) return
    const single = this.#single
    if (single !== null) {
      // The usual case: one buffer (one event, or one burst joined once for all viewers), one write.
      if (socket.writableNeedDrain) {
        this.#awaitDrain()
        return
      }
      this.#single = null
      this.#account(single.length)
      socket.write(single)
      if (this.#closing) this.#finish()
      return
    }
    const queue = this.#queue
    const limit = this.#holding ? this.#holdAt : queue.length
    while (this.#queueHead < limit) {
      if (socket.writableNeedDrain) {
        this.#awaitDrain()
        return
      }
      const first = this.#queueHead
      let size = (queue[first] as Buffer).length
      let next = first + 1
      while (next < limit && size + (queue[next] as Buffer).length <= MAX_WRITE_BYTES) {
        size += (queue[next] as Buffer).length
        next++
      }
      const buf =
        next === first + 1 ? (queue[first] as Buffer) : Buffer.concat(queue.slice(first, next), size)
      this.#queueHead = next
      this.#account(size)
      socket.write(buf)
    }
    if (this.#holding) return
    // Emptied in place: a viewer's queue array lives as long as the viewer, not one per turn.
    queue.length = 0
    this.#queueHead = 0
    if (this.#closing) this.#finish()
  }

  /** FIN after the last byte; a client that never closes its side is cut off after {@link END_GRACE_MS}. */
  #finish(): void {
    this.#ended = true
    this.#socket.end()
    this.#armEndTimer()
  }

  #armEndTimer(): void {
    if (this.#endTimer !== null) return
    this.#endTimer = setTimeout(() => this.#socket.destroy(), END_GRACE_MS)
    this.#endTimer.unref()
  }

  #enqueue(buf: Buffer, replay: boolean): void {
    if (replay) this.#replayQueued += buf.length
    else this.#liveQueued += buf.length
    if (this.#single === null && this.#queueHead === this.#queue.length && !this.#holding) {
      this.#single = buf
      return
    }
    this.#spill()
    this.#queue.push(buf)
  }

  /** Moves the single pending buffer to the queue (more are coming, or a gap is being filled). */
  #spill(): void {
    if (this.#single === null) return
    this.#queue.push(this.#single)
    this.#single = null
  }

  #pending(): boolean {
    return this.#single !== null || this.#queueHead < this.#queue.length
  }

  /** Written bytes come off the replayed count first: replay always precedes live bytes in the queue. */
  #account(bytes: number): void {
    const fromReplay = Math.min(bytes, this.#replayQueued)
    this.#replayQueued -= fromReplay
    this.#liveQueued -= bytes - fromReplay
  }

  #markDirty(): void {
    if (this.#dirty || this.#awaitingDrain) return
    this.#dirty = true
    dirty.push(this)
    if (!flushScheduled) {
      flushScheduled = true
      setImmediate(flushDirty)
    }
  }

  #awaitDrain(): void {
    if (this.#awaitingDrain) return
    this.#awaitingDrain = true
    this.#socket.once('drain', ViewerStream.#onDrain)
  }

  #placeFill(run: string, from: number, to: number, filled: Delivery[] | null): void {
    if (this.#ended) return
    if (filled === null || filled.length < to - from + 1) {
      this.#shared.metrics.gapsUnfilled.inc()
      this.#shared.log.info(
        { kasmId: this.kasmId, run, from, to, filled: filled?.length ?? 0 },
        'viewer replay gap not (fully) filled from the trace',
      )
    }
    if (filled !== null && filled.length > 0) {
      const queue = this.#queue
      const frames = filled.map((d) => d.frame)
      let bytes = 0
      for (const f of frames) bytes += f.length
      // Not splice(...frames): a long fill would pass more arguments than a call takes.
      this.#queue = queue.slice(0, this.#holdAt).concat(frames, queue.slice(this.#holdAt))
      this.#replayQueued += bytes
    }
    this.#holding = false
    this.#markDirty()
  }

  #dropSlow(): void {
    this.#shared.metrics.slowConsumers.inc()
    this.#shared.log.info(
      { kasmId: this.kasmId, queued: this.#liveQueued + this.#socket.writableLength },
      'slow viewer disconnected; it resumes from the buffer with Last-Event-ID',
    )
    this.#endReason = 'slow_consumer'
    this.#ended = true
    this.#unsubscribe()
    this.#socket.destroy()
  }

  #unsubscribe(): void {
    this.#subscription?.close()
    this.#subscription = null
  }

  /** The socket closed (any reason): free everything, tell the coordinator once. */
  #gone(): void {
    this.#socket[VIEWER] = undefined
    this.#ended = true
    if (this.#endTimer !== null) clearTimeout(this.#endTimer)
    this.#endTimer = null
    this.#unsubscribe()
    this.#single = null
    this.#queue = []
    this.#queueHead = 0
    this.#liveQueued = 0
    this.#replayQueued = 0
    this.#shared.owner.viewerEnded(this, this.#endReason)
  }
}

function noop(): void {}
