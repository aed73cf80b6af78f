import type { BusMessage } from './bus.ts'

/**
 * Server-sent-events framing of the sidebar protocol, and the one heartbeat timer every viewer shares.
 * Nothing else lives here: parsing the upstream stream is eventsource-parser's job (see upstream-reader).
 */

const HEAD_START =
  'HTTP/1.1 200 OK\r\n' +
  'Content-Type: text/event-stream\r\n' +
  'Cache-Control: no-store\r\n' +
  'X-Accel-Buffering: no\r\n' +
  'X-Content-Type-Options: nosniff\r\n' +
  'Connection: close\r\n' +
  'X-Request-ID: '

/**
 * The response head of an event stream the gateway serves on a taken-over socket: no chunked framing, the
 * body ends when the socket does. It names the request as every other answer does; `requestId` is the
 * gateway's own or one `http/request-id.ts` admitted (no CR or LF can reach here).
 */
export function streamHead(requestId: string): Buffer {
  return Buffer.from(`${HEAD_START}${requestId}\r\n\r\n`)
}

/** `: ping` every interval: a comment, ignored by every SSE client, that keeps proxies from idling out. */
export const PING_FRAME: Buffer = Buffer.from(': ping\n\n')

/** The frame for a run that closed its trace without `done`: no id, empty object, as the runtime sends it. */
export const CLOSED_FRAME: Buffer = Buffer.from('event: closed\ndata: {}\n\n')

/** The SSE frame of a bus message, as every bus and the trace backfill send it (built once per event). */
export function frameOf(message: BusMessage): Buffer {
  return message.kind === 'event'
    ? eventFrame(message.run, message.seq, message.type, message.data)
    : CLOSED_FRAME
}

/** The `: run <run_id>` line that opens a stream (and, from the gateway, announces a new run). */
export function runComment(run: string): Buffer {
  return Buffer.from(`: run ${oneLine(run)}\n`)
}

/**
 * One event frame: `id: <run>:<seq>`, `event: <type>`, then one `data:` line per line of `data`, so the
 * runtime's payload reaches the viewer byte for byte (the parser joined multi-line data with `\n`).
 */
export function eventFrame(run: string, seq: number, type: string, data: string): Buffer {
  const lines = data.split('\n')
  let text = `id: ${oneLine(run)}:${seq}\nevent: ${oneLine(type)}\n`
  for (const line of lines) text += `data: ${line}\n`
  return Buffer.from(`${text}\n`)
}

// A run id or type comes from the runtime; a stray newline in one must not be able to forge a frame.
function oneLine(value: string): string {
  return /[\r\n]/.test(value) ? value.replace(/[\r\n]+/g, ' ') : value
}

/** Something that gets a heartbeat; returns nothing, must not throw. */
export interface HeartbeatTarget {
  ping(): void
}

/** Ticks per interval: each tick pings one slice of the targets. */
const SLICES = 15

/**
 * One timer for every open stream instead of one per connection. It runs only while a target is registered,
 * is unref'ed, and ticks `SLICES` times per interval, each tick pinging one slice of the targets: every target
 * still gets a ping per interval, but thousands of viewers never get theirs in the same instant (which would
 * delay the events written in that turn).
 */
export class Heartbeat {
  readonly #slices: Set<HeartbeatTarget>[] = Array.from({ length: SLICES }, () => new Set())
  readonly #slotOf = new Map<HeartbeatTarget, number>()
  readonly #intervalMs: number
  #timer: NodeJS.Timeout | undefined
  #tick = 0
  #nextSlot = 0

  constructor(intervalMs: number) {
    this.#intervalMs = intervalMs
  }

  /** Number of registered targets (tests assert nothing leaks). */
  get size(): number {
    return this.#slotOf.size
  }

  /** Whether the shared timer is currently armed (tests assert it stops with the last target). */
  get running(): boolean {
    return this.#timer !== undefined
  }

  add(target: HeartbeatTarget): void {
    if (this.#slotOf.has(target)) return
    const slot = this.#nextSlot
    this.#nextSlot = (slot + 1) % SLICES
    this.#slotOf.set(target, slot)
    this.#slices[slot]?.add(target)
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#beat(), Math.max(1, Math.round(this.#intervalMs / SLICES)))
      this.#timer.unref()
    }
  }

  delete(target: HeartbeatTarget): void {
    const slot = this.#slotOf.get(target)
    if (slot === undefined) return
    this.#slotOf.delete(target)
    this.#slices[slot]?.delete(target)
    if (this.#slotOf.size === 0) this.stop()
  }

  /** Clears the timer and forgets every target. */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer)
    this.#timer = undefined
    this.#slotOf.clear()
    for (const slice of this.#slices) slice.clear()
  }

  #beat(): void {
    const slice = this.#slices[this.#tick]
    this.#tick = (this.#tick + 1) % SLICES
    if (slice !== undefined) for (const target of slice) target.ping()
  }
}
