import type { ServerResponse } from 'node:http'
import type { TimerSet } from './timers.ts'

/** The frame a stream gets when its run closed the trace without `done`; the connection then ends. */
export const CLOSED_FRAME = 'event: closed\ndata: {}\n\n'
const PING = ': ping\n\n'

/** The `: run <id>` comment that starts a stream and precedes the first event of every new run. */
export function runComment(run: string): string {
  return `: run ${run}\n`
}

interface OpenStream {
  readonly res: ServerResponse
  /** While set, writes queue here instead of reaching the socket, as on a stalled network path. */
  stalled: string[] | null
  /** End the response once the stall is lifted and the queue flushed. */
  endAfterFlush: boolean
}

/**
 * The open `/events` connections: writes each frame (serialised once) to all of them, pings them, and
 * simulates network trouble. A stall applies to the streams open when it starts; a stream opened during a
 * stall flows normally (a reconnect takes a fresh path), and a stalled stream gets what it missed, in order,
 * when the stall lifts, as TCP would deliver it.
 */
export class EventStreams {
  private readonly open = new Set<OpenStream>()
  private accepted = 0

  constructor(timers: TimerSet, pingIntervalMs: number) {
    timers.every(pingIntervalMs, () => {
      for (const stream of this.open) if (stream.stalled === null) this.write(stream, PING)
    })
  }

  /** Connections open now. */
  get count(): number {
    return this.open.size
  }

  /** Connections ever accepted. */
  get total(): number {
    return this.accepted
  }

  /**
   * Takes over a hijacked response: sends the SSE headers and `preamble` (the run comment and the replay),
   * then keeps it for live frames, or ends it at once when `end` (a closed trace).
   */
  attach(res: ServerResponse, preamble: string, end: boolean): void {
    this.accepted++
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    })
    // A peer that vanished mid-write must not take the process down; 'close' does the bookkeeping.
    res.on('error', () => {})
    res.socket?.setNoDelay(true)
    res.socket?.setTimeout(0)
    res.write(preamble)
    if (end) {
      res.end()
      return
    }
    const stream: OpenStream = { res, stalled: null, endAfterFlush: false }
    this.open.add(stream)
    res.on('close', () => this.open.delete(stream))
  }

  /** Writes `chunk` to every open stream (queued on stalled ones). */
  broadcast(chunk: string): void {
    for (const stream of this.open) this.write(stream, chunk)
  }

  /** Writes `chunk` (e.g. the closed frame) to every stream and then ends each one. */
  endAll(chunk: string): void {
    for (const stream of this.open) {
      if (stream.stalled !== null) {
        stream.stalled.push(chunk)
        stream.endAfterFlush = true
        continue
      }
      this.open.delete(stream)
      stream.res.end(chunk)
    }
  }

  /** Destroys every open socket, as a network drop would. */
  drop(): void {
    for (const stream of this.open) stream.res.destroy()
    this.open.clear()
  }

  /** Starts (for the streams open now) or lifts (for all) a stall. */
  stall(stalled: boolean): void {
    for (const stream of this.open) {
      if (stalled) {
        stream.stalled ??= []
        continue
      }
      const queued = stream.stalled
      stream.stalled = null
      if (queued !== null && queued.length > 0) stream.res.write(queued.join(''))
      if (stream.endAfterFlush) {
        this.open.delete(stream)
        stream.res.end()
      }
    }
  }

  private write(stream: OpenStream, chunk: string): void {
    if (stream.stalled !== null) stream.stalled.push(chunk)
    else stream.res.write(chunk)
  }
}
