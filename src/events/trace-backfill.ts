import { type Dispatcher, request } from 'undici'
import type { Session } from '../sessions/types.ts'
import { TOKEN_HEADER } from '../upstream/agent.ts'
import { type TokenEcho, tokenEcho } from '../upstream/token-echo.ts'
import { type BusMessage, type Delivery, storedBytes } from './bus.ts'
import { OwnFault } from './own-fault.ts'
import { frameOf } from './sse.ts'

/** The most events one fill returns (a viewer a million events behind gets the newest part, then live). */
export const MAX_FILL = 50_000

/** Options of {@link TraceBackfill}. */
export interface TraceBackfillOptions {
  /** The dispatcher for a session's upstream (the URL policy guards admin-registered ones). */
  readonly dispatcherFor: (session: Session) => Dispatcher
  /** Stop reading a trace.jsonl after this many bytes (a runaway file must not exhaust memory). */
  readonly maxBytes?: number
  /** Called with the number of token echoes masked in a line (a broken runtime's trace). */
  readonly onTokenEcho?: (echoes: number) => void
  /** A line longer than this (GATEWAY_EVENT_MAX_BYTES) is read past, never held: that event stays a gap. */
  readonly maxLineBytes?: number
  /** The most one fill returns, as stored (GATEWAY_EVENT_BUFFER_BYTES): past it, the newest part. */
  readonly maxFillBytes?: number
  /** Called for every line read past for its size. */
  readonly onOversized?: () => void
  /** Called with what the gateway's own reading of a trace threw (a bug, logged as one); that fill is null. */
  readonly onFault?: (err: unknown) => void
}

/**
 * Fills a gap in a run's events from the runtime's `artifacts/trace.jsonl`, whose lines are exactly the
 * `data` of the events (so the filled frames are byte-identical to the live ones).
 *
 * trace.jsonl belongs to whatever run the runtime serves now, and its lines carry no run id: the fill is
 * used only when an `info` line at or before the gap names the wanted run; otherwise it answers null and
 * the viewer sees the gap rather than another run's events. Identical concurrent requests (many viewers
 * reconnecting at once) share one download.
 */
export class TraceBackfill {
  readonly #dispatcherFor: (session: Session) => Dispatcher
  readonly #maxBytes: number
  readonly #onTokenEcho: (echoes: number) => void
  readonly #maxLine: number
  readonly #maxFill: number
  readonly #onOversized: () => void
  readonly #onFault: (err: unknown) => void
  readonly #inFlight = new Map<string, Promise<Delivery[] | null>>()

  constructor(options: TraceBackfillOptions) {
    this.#dispatcherFor = options.dispatcherFor
    this.#maxBytes = options.maxBytes ?? 256 * 1024 * 1024
    this.#onTokenEcho = options.onTokenEcho ?? (() => {})
    this.#maxLine = options.maxLineBytes ?? Number.POSITIVE_INFINITY
    this.#maxFill = options.maxFillBytes ?? Number.POSITIVE_INFINITY
    this.#onOversized = options.onOversized ?? (() => {})
    this.#onFault = options.onFault ?? (() => {})
  }

  /**
   * The events `wantedFrom`..`to` (inclusive; at most the newest {@link MAX_FILL}) of `run`, in order; null
   * when the trace cannot be read or is not that run's. Events missing from the file are simply absent.
   */
  fill(session: Session, run: string, wantedFrom: number, to: number): Promise<Delivery[] | null> {
    // The newest MAX_FILL events of a longer gap: the rest stays a visible gap, order is kept either way.
    const from = Math.max(wantedFrom, to - MAX_FILL + 1)
    // The session version is part of the key: a rotated token or moved upstream must not reuse a failure.
    const key = `${session.kasmId}\u0000${session.version}\u0000${run}\u0000${from}\u0000${to}`
    let pending = this.#inFlight.get(key)
    if (pending === undefined) {
      pending = this.#read(session, run, from, to)
        .catch((err: unknown) => {
          // A trace the runtime cannot serve (refused connection, reset) is an unfilled gap, nothing more.
          if (err instanceof OwnFault) this.#onFault(err.cause)
          return null
        })
        .finally(() => this.#inFlight.delete(key))
      this.#inFlight.set(key, pending)
    }
    return pending
  }

  async #read(session: Session, run: string, from: number, to: number): Promise<Delivery[] | null> {
    const url = new URL('artifacts/trace.jsonl', session.upstream)
    const res = await request(url, {
      dispatcher: this.#dispatcherFor(session),
      method: 'GET',
      headers: { [TOKEN_HEADER]: session.messagingToken.reveal() },
    })
    if (res.statusCode !== 200) {
      await res.body.dump()
      return null
    }
    const out = new FillBuffer(this.#maxFill)
    const echo = tokenEcho(session.messagingToken)
    let runConfirmed = false
    let rest = ''
    /** Inside a line over the cap: everything up to its newline is dropped as it arrives. */
    let discarding = false
    let read = 0
    const decoder = new TextDecoder()
    const take = (line: string): 'confirmed' | 'wrong-run' | 'done' | 'next' => {
      if (line.length <= this.#maxLine) return this.#take(line, run, from, to, runConfirmed, out, echo)
      this.#onOversized()
      return 'next'
    }
    // Only reading the body fails because of the runtime: what the line handling throws is ours (OwnFault).
    try {
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        try {
          read += chunk.length
          if (read > this.#maxBytes) return null
          rest += decoder.decode(chunk, { stream: true })
          let start = 0
          if (discarding) {
            const nl = rest.indexOf('\n')
            if (nl === -1) {
              rest = ''
              continue
            }
            start = nl + 1
            discarding = false
          }
          for (let nl = rest.indexOf('\n', start); nl !== -1; nl = rest.indexOf('\n', start)) {
            const line = rest.slice(start, nl).replace(/\r$/, '')
            start = nl + 1
            const verdict = take(line)
            if (verdict === 'wrong-run') return null
            if (verdict === 'confirmed') runConfirmed = true
            if (verdict === 'done') return runConfirmed ? out.events() : null
          }
          rest = rest.slice(start)
          if (rest.length > this.#maxLine) {
            this.#onOversized()
            discarding = true
            rest = ''
          }
        } catch (err) {
          throw new OwnFault(err)
        }
      }
      try {
        rest += decoder.decode()
        if (rest.length > 0 && !discarding) {
          const verdict = take(rest.replace(/\r$/, ''))
          if (verdict === 'wrong-run') return null
          if (verdict === 'confirmed') runConfirmed = true
        }
        return runConfirmed ? out.events() : null
      } catch (err) {
        throw new OwnFault(err)
      }
    } finally {
      // Stops the download once the range is read (or on any early return).
      res.body.destroy()
    }
  }

  /** Handles one trace line; says whether it confirmed or contradicted the run, or passed the range. */
  #take(
    line: string,
    run: string,
    from: number,
    to: number,
    runConfirmed: boolean,
    out: FillBuffer,
    echo: TokenEcho,
  ): 'confirmed' | 'wrong-run' | 'done' | 'next' {
    if (line.length === 0) return 'next'
    let record: unknown
    try {
      record = JSON.parse(line)
    } catch {
      return 'next'
    }
    if (typeof record !== 'object' || record === null) return 'next'
    const { seq, type, info } = record as { seq?: unknown; type?: unknown; info?: unknown }
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || typeof type !== 'string') return 'next'
    if (seq > to) return 'done'
    let verdict: 'confirmed' | 'wrong-run' | 'next' = 'next'
    if (type === 'info' && typeof info === 'object' && info !== null) {
      const runId = (info as { run_id?: unknown }).run_id
      if (typeof runId === 'string') verdict = runId === run ? 'confirmed' : 'wrong-run'
    }
    if (seq >= from && (runConfirmed || verdict === 'confirmed')) {
      const { text: data, echoes } = echo.maskText(line)
      if (echoes > 0) this.#onTokenEcho(echoes)
      const message: BusMessage = { kind: 'event', run, seq, type, data }
      out.push({ message, frame: frameOf(message) })
    } else if (seq >= from && verdict !== 'wrong-run') {
      // An event inside the range before any info line: its run cannot be confirmed, so nothing is filled.
      return 'wrong-run'
    }
    return verdict
  }
}

/** The events of a fill, at most `maxBytes` as stored: past it the oldest go, so the newest part is kept. */
class FillBuffer {
  readonly maxBytes: number
  readonly #events: Delivery[] = []
  #first = 0
  #bytes = 0

  constructor(maxBytes: number) {
    this.maxBytes = maxBytes
  }

  push(d: Delivery): void {
    this.#events.push(d)
    this.#bytes += storedBytes(d)
    while (this.#bytes > this.maxBytes && this.#first < this.#events.length) {
      this.#bytes -= storedBytes(this.#events[this.#first] as Delivery)
      this.#events[this.#first++] = undefined as unknown as Delivery
    }
  }

  events(): Delivery[] {
    return this.#events.slice(this.#first)
  }
}
