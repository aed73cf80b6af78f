/**
 * One run's trace: every line of its trace.jsonl, the replay buffer of the last `capacity` events, and the
 * files its output directory would hold (screenshots and anything put there).
 */

/** One appended event: its trace.jsonl line and the SSE frame carrying it (serialised once, sent to all). */
export interface TraceEvent {
  readonly seq: number
  readonly type: string
  readonly ts: string
  readonly payload: unknown
  /** The exact trace.jsonl line (no newline). */
  readonly line: string
  /** `id: <run>:<seq>\nevent: <type>\ndata: <line>\n\n` */
  readonly frame: string
}

/** How a trace ended: still open, with a `done` event, or closed without one. */
export type TraceEnding = 'open' | 'done' | 'closed'

/**
 * The name of the payload field for an event type: the type itself, except `delivery` (whose payload is a
 * message) and `done` (which has none).
 */
export function payloadField(type: string): string | null {
  if (type === 'done') return null
  if (type === 'delivery') return 'message'
  return type
}

/** An event type must be safe to put on an SSE `event:` line. */
const EVENT_TYPE = /^[a-z][a-z0-9_.-]{0,63}$/

export class RunTrace {
  readonly run: string
  readonly startedAt = new Date().toISOString()
  /** Every line ever appended: the run's trace.jsonl. */
  readonly lines: string[] = []
  /** Payloads kept for report.json. */
  readonly steps: unknown[] = []
  readonly logs: Array<{ ts: string; level: string; msg: string }> = []
  lastStatus: unknown = null
  /** Extra regular files in the run's output directory, by relative path (screenshots are generated). */
  readonly files = new Map<string, Buffer>()
  readonly screenshots = new Set<string>()
  ending: TraceEnding = 'open'
  endedAt: string | null = null

  private readonly capacity: number
  private buffer: TraceEvent[] = []
  private head = 0
  private seq = 0

  constructor(run: string, capacity: number) {
    this.run = run
    this.capacity = Math.max(1, capacity)
  }

  get lastSeq(): number {
    return this.seq
  }

  /** Appends an event; throws once the trace has ended (a run's `done` is its last event). */
  append(type: string, payload: unknown): TraceEvent {
    if (this.ending !== 'open') throw new Error(`trace of run ${this.run} has ended (${this.ending})`)
    if (!EVENT_TYPE.test(type)) throw new Error(`invalid event type ${JSON.stringify(type)}`)
    const seq = ++this.seq
    const ts = new Date().toISOString()
    const field = payloadField(type)
    const record: Record<string, unknown> = { seq, type, ts }
    if (field !== null) record[field] = payload ?? {}
    const line = JSON.stringify(record)
    const event: TraceEvent = {
      seq,
      type,
      ts,
      payload,
      line,
      frame: `id: ${this.run}:${seq}\nevent: ${type}\ndata: ${line}\n\n`,
    }
    this.lines.push(line)
    this.remember(event)
    this.buffer.push(event)
    if (this.buffer.length - this.head > this.capacity) this.head++
    // Compact now and then rather than shifting on every append.
    if (this.head >= this.capacity) {
      this.buffer = this.buffer.slice(this.head)
      this.head = 0
    }
    if (type === 'done') {
      this.ending = 'done'
      this.endedAt = ts
    }
    return event
  }

  /** Marks the trace closed without a `done` event. */
  close(): void {
    if (this.ending !== 'open') return
    this.ending = 'closed'
    this.endedAt = new Date().toISOString()
  }

  /** Buffered events with a seq above `after` (every buffered event when `after` is undefined). */
  replay(after?: number): TraceEvent[] {
    const first = this.buffer[this.head]
    if (first === undefined) return []
    if (after === undefined || after < first.seq) return this.buffer.slice(this.head)
    return this.buffer.slice(this.head + (after - first.seq) + 1)
  }

  private remember(event: TraceEvent): void {
    const payload = event.payload
    if (event.type === 'step') this.steps.push(payload)
    else if (event.type === 'status') this.lastStatus = payload
    else if (event.type === 'log' && isRecord(payload)) {
      this.logs.push({ ts: event.ts, level: String(payload.level ?? 'info'), msg: String(payload.msg ?? '') })
    } else if (event.type === 'screenshot' && isRecord(payload) && typeof payload.file === 'string') {
      this.screenshots.add(payload.file)
    }
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
