import { createParser, type EventSourceMessage } from 'eventsource-parser'
import type { FastifyBaseLogger } from 'fastify'
import { type Dispatcher, request } from 'undici'
import type { Env } from '../config.ts'
import { parseEventId } from '../protocol/events.ts'
import type { Session } from '../sessions/types.ts'
import { tracedRequest } from '../tracing/spans.ts'
import { TOKEN_HEADER } from '../upstream/agent.ts'
import { tokenEcho } from '../upstream/token-echo.ts'
import { isAddressRefused } from '../upstream/url-policy.ts'
import type { BusMessage, EventBus, StreamHead } from './bus.ts'
import type { EventMetrics } from './metrics.ts'
import { OwnFault } from './own-fault.ts'
import type { TraceBackfill } from './trace-backfill.ts'

/** The reader's delays, from the protocol's advice for a sidebar (scaled down in tests). */
export interface ReaderTiming {
  /** Poll interval while the runtime is not up (Kasm's proxy answers 502) and no stream was live yet. */
  readonly notUpPollMs: number
  /** Delays after a live stream dropped, one per consecutive failure; the last repeats. */
  readonly backoffMs: readonly number[]
  /** No byte (not even `: ping`) for this long: the stream is dead. */
  readonly idleTimeoutMs: number
  /** After `event: closed`, how often `GET inbox` is asked whether a new run started. */
  readonly closedPollMs: number
  /** Retry interval while the runtime refuses the messaging token (401/403), until it is rotated. */
  readonly refusedRetryMs: number
}

/** The timing the environment asks for: 1.5 s poll, 1-2-4-8-10 s backoff, 30 s after a refused token. */
export function readerTiming(env: Env): ReaderTiming {
  const scale = env.GATEWAY_UPSTREAM_RETRY_SCALE
  const ms = (v: number) => Math.max(1, Math.round(v * scale))
  return {
    notUpPollMs: ms(1500),
    backoffMs: [1000, 2000, 4000, 8000, 10_000].map(ms),
    idleTimeoutMs: env.GATEWAY_UPSTREAM_IDLE_TIMEOUT_MS,
    closedPollMs: env.GATEWAY_CLOSED_POLL_MS,
    refusedRetryMs: ms(30_000),
  }
}

/**
 * How the runtime fares as the reader sees it, for people: `live` once a stream is open; `not_up` while
 * the runtime is not there yet (Kasm's proxy answers 502); `token_refused` when it refuses the messaging
 * token; `unreachable` when it answers with an error, or cannot be reached after a stream was live.
 */
export type ReaderHealth = 'live' | 'not_up' | 'token_refused' | 'unreachable'

/** What the reader is doing, for tests and logs. */
export type ReaderState = 'starting' | 'connecting' | 'live' | 'retrying' | 'closed' | 'stopped'

/** Why a reader stopped itself: its append was refused for a stale fence, or its session is gone. */
export type ReaderStop = 'lease_lost' | 'session_removed'

/** Everything an {@link UpstreamReader} needs; it owns none of it. */
export interface UpstreamReaderOptions {
  readonly kasmId: string
  /** The session as registered now: read before every connection, so a rotated token is used at once. */
  readonly session: () => Promise<Session | undefined>
  readonly bus: EventBus
  /** The lease's fencing token; an append refused for it means another reader took over. */
  readonly fence: number
  /** The dispatcher for the session's upstream (the URL policy guards admin-registered ones). */
  readonly dispatcherFor: (session: Session) => Dispatcher
  readonly backfill: TraceBackfill
  readonly timing: ReaderTiming
  readonly log: FastifyBaseLogger
  readonly metrics: EventMetrics
  /** True while the bus's store is known to be away (see SessionStreamsOptions.storeOutage). */
  readonly storeOutage?: () => boolean
  /**
   * The largest event kept (GATEWAY_EVENT_MAX_BYTES): a larger one is skipped and counted, never buffered
   * whole, and viewers see a gap in seq.
   */
  readonly maxEventBytes: number
  /** The bus refused an append (stale fence) or the session disappeared: the reader has stopped itself. */
  readonly onStop?: (why: ReaderStop) => void
  /** Called when {@link ReaderHealth} changes (never twice in a row with the same value). */
  readonly onHealth?: (health: ReaderHealth) => void
}

/** How one connection attempt ended. */
type Outcome =
  | { kind: 'not_up' }
  | { kind: 'refused'; status: number }
  | { kind: 'address_refused' }
  | { kind: 'bad_status'; status: number }
  | { kind: 'dropped'; live: boolean }
  | { kind: 'stalled'; live: boolean }
  | { kind: 'bus_failed'; err: unknown }
  | { kind: 'faulted'; err: unknown }
  | { kind: 'closed' }
  | { kind: 'interrupted' }
  | { kind: 'lease_lost' }
  | { kind: 'session_removed' }

const STALLED = Symbol('stalled')
const INTERRUPTED = Symbol('interrupted')

/**
 * The one SSE client of a session's runtime: reads `GET <upstream>events` with the messaging token, appends
 * what it reads to the bus (in order, per chunk), and reconnects with `after=<last seq>&run=<run>` so
 * nothing is lost. Reconnection follows the protocol: poll every 1.5 s while the runtime is not up, back
 * off 1, 2, 4.. 10 s after a live stream dropped, treat 45 s of silence as a dead stream, and after
 * `event: closed` wait (polling `GET inbox`) for a new run. A gap the runtime's replay cannot fill is filled
 * from `artifacts/trace.jsonl` when possible. Payloads are never logged: types and sequence numbers only.
 */
export class UpstreamReader {
  readonly kasmId: string
  readonly #o: UpstreamReaderOptions
  #state: ReaderState = 'starting'
  #stopped = false
  /** Aborts the current request or wakes the current sleep. */
  #interrupt: ((why: symbol) => void) | null = null
  #loop: Promise<void> | null = null
  /** Consecutive failures since the last healthy live stream (indexes `backoffMs`). */
  #failures = 0
  /** A stream was live and dropped: failures back off instead of polling. */
  #backingOff = false
  #connections = 0
  #health: ReaderHealth | null = null

  constructor(options: UpstreamReaderOptions) {
    this.kasmId = options.kasmId
    this.#o = options
  }

  get state(): ReaderState {
    return this.#state
  }

  /** Upstream connection attempts so far. */
  get connections(): number {
    return this.#connections
  }

  #report(health: ReaderHealth): void {
    if (this.#health === health) return
    this.#health = health
    this.#o.onHealth?.(health)
  }

  /** Starts the read loop (idempotent). */
  start(): void {
    if (this.#loop !== null || this.#stopped) return
    this.#loop = this.#run().catch((err: unknown) => {
      this.#o.log.error({ err, kasmId: this.kasmId }, 'event reader failed')
    })
  }

  /** Reconnects now (token rotated, upstream moved): ends the current stream or wait at once. */
  restart(): void {
    this.#failures = 0
    this.#backingOff = false
    this.#interrupt?.(INTERRUPTED)
  }

  /** Stops reading and resolves once the loop has exited and its connection is closed. */
  async stop(): Promise<void> {
    this.#stopped = true
    this.#interrupt?.(INTERRUPTED)
    await this.#loop
    this.#state = 'stopped'
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      let head: StreamHead | null
      try {
        head = await this.#o.bus.head(this.kasmId)
      } catch (err) {
        // The bus's store is down (cluster mode): nothing can be appended anyway; try again shortly.
        const level = this.#o.storeOutage?.() ? 'debug' : 'warn'
        this.#o.log[level]({ err, kasmId: this.kasmId }, 'event bus unavailable; reader waiting')
        this.#state = 'retrying'
        await this.#sleep(this.#longestDelay())
        continue
      }
      let outcome: Outcome | undefined
      if (head?.closed) {
        this.#state = 'closed'
        outcome = await this.#waitForNewRun(head.run)
        if (outcome.kind === 'interrupted') continue
      }
      if (outcome?.kind !== 'session_removed') outcome = await this.#connect(head)
      if (this.#stopped || outcome === undefined) break
      if (outcome.kind === 'lease_lost' || outcome.kind === 'session_removed') {
        this.#stopped = true
        this.#state = 'stopped'
        const level = this.#o.storeOutage?.() ? 'debug' : 'warn'
        this.#o.log[level]({ kasmId: this.kasmId, why: outcome.kind }, 'event reader stopped')
        this.#o.onStop?.(outcome.kind)
        break
      }
      await this.#afterOutcome(outcome)
    }
    this.#state = 'stopped'
  }

  /** Counts, logs and waits as the outcome asks. */
  async #afterOutcome(outcome: Outcome): Promise<void> {
    const { metrics, log, timing } = this.#o
    const kasmId = this.kasmId
    switch (outcome.kind) {
      case 'closed':
      case 'interrupted':
        return
      case 'refused':
        metrics.reconnects.inc({ reason: 'token_refused' })
        metrics.upstreamErrors.inc({ reason: 'token_refused' })
        log.warn(
          { kasmId, status: outcome.status },
          'runtime refused the messaging token; retrying slowly until it is rotated',
        )
        this.#state = 'retrying'
        this.#report('token_refused')
        await this.#sleep(timing.refusedRetryMs)
        return
      case 'address_refused':
        metrics.reconnects.inc({ reason: 'address_refused' })
        metrics.upstreamErrors.inc({ reason: 'address_refused' })
        log.warn({ kasmId }, 'upstream resolves to an address the URL policy refuses; retrying slowly')
        this.#state = 'retrying'
        await this.#sleep(timing.refusedRetryMs)
        return
      case 'not_up':
        metrics.reconnects.inc({ reason: 'not_up' })
        metrics.upstreamErrors.inc({ reason: 'unreachable' })
        // After a live stream dropped, a runtime that does not answer is gone rather than not up yet.
        this.#report(this.#backingOff ? 'unreachable' : 'not_up')
        break
      case 'bad_status':
        metrics.reconnects.inc({ reason: 'bad_status' })
        metrics.upstreamErrors.inc({ reason: 'unreachable' })
        this.#report('unreachable')
        log.warn({ kasmId, status: outcome.status }, 'runtime answered the event stream with an error')
        break
      case 'dropped':
        metrics.reconnects.inc({ reason: 'dropped' })
        metrics.upstreamErrors.inc({ reason: 'stream_dropped' })
        if (outcome.live) this.#backingOff = true
        log.info({ kasmId }, 'upstream event stream dropped; reconnecting')
        break
      case 'stalled':
        metrics.reconnects.inc({ reason: 'stalled' })
        metrics.upstreamErrors.inc({ reason: 'stream_stalled' })
        if (outcome.live) this.#backingOff = true
        log.warn({ kasmId, idleMs: timing.idleTimeoutMs }, 'upstream event stream silent; reconnecting')
        break
      case 'bus_failed': {
        // Not the runtime's doing: its stream is let go and read again (from the bus's head) once the bus
        // answers, on the same schedule as a bus that is away when the reader starts.
        metrics.reconnects.inc({ reason: 'bus_failed' })
        const level = this.#o.storeOutage?.() ? 'debug' : 'warn'
        log[level]({ err: outcome.err, kasmId }, 'event bus append failed; reader waiting for the bus')
        this.#state = 'retrying'
        await this.#sleep(this.#longestDelay())
        return
      }
      case 'faulted':
        metrics.reconnects.inc({ reason: 'internal_error' })
        this.#backingOff = true
        log.error({ err: outcome.err, kasmId }, 'event reader failed on the upstream stream; reconnecting')
        break
    }
    this.#state = 'retrying'
    if (!this.#backingOff) {
      await this.#sleep(timing.notUpPollMs)
      return
    }
    const delays = timing.backoffMs
    const delay = delays[Math.min(this.#failures, delays.length - 1)] ?? timing.notUpPollMs
    this.#failures++
    await this.#sleep(delay)
  }

  /** One connection: headers, then chunks until it ends, stalls, closes its run or is interrupted. */
  async #connect(head: StreamHead | null): Promise<Outcome> {
    const session = await this.#o.session()
    if (session === undefined) return { kind: 'session_removed' }
    if (this.#stopped) return { kind: 'interrupted' }
    this.#state = 'connecting'
    const url = new URL('events', session.upstream)
    if (head !== null) {
      if (head.seq > 0) url.searchParams.set('after', String(head.seq))
      url.searchParams.set('run', head.run)
    }
    const abort = new AbortController()
    let why: symbol | null = null
    this.#interrupt = (reason) => {
      why ??= reason
      abort.abort()
    }
    let idle: NodeJS.Timeout | undefined
    let live = false
    try {
      this.#connections++
      const res = await tracedRequest('events', { 'krg.kasm_id': this.kasmId }, url, {
        dispatcher: this.#o.dispatcherFor(session),
        method: 'GET',
        headers: { accept: 'text/event-stream', [TOKEN_HEADER]: session.messagingToken.reveal() },
        signal: abort.signal,
        bodyTimeout: 0,
      })
      if (res.statusCode !== 200) {
        await res.body.dump().catch(() => {})
        if (res.statusCode === 401 || res.statusCode === 403)
          return { kind: 'refused', status: res.statusCode }
        if (res.statusCode === 502 || res.statusCode === 503 || res.statusCode === 504) {
          return { kind: 'not_up' }
        }
        return { kind: 'bad_status', status: res.statusCode }
      }
      live = true
      this.#state = 'live'
      this.#report('live')
      this.#o.metrics.upstreamStreams.inc()
      const liveSince = Date.now()
      idle = setTimeout(() => this.#interrupt?.(STALLED), this.#o.timing.idleTimeoutMs)
      idle.unref()
      try {
        const ended = await this.#consume(res.body as AsyncIterable<Buffer>, head, session, () =>
          idle?.refresh(),
        )
        if (ended === 'closed') return { kind: 'closed' }
        if (ended === 'lease_lost') return { kind: 'lease_lost' }
        return { kind: 'dropped', live }
      } finally {
        // A stream that lived long was healthy (one that carried events resets as it appends them): the next
        // drop starts the backoff at 1 s again.
        if (Date.now() - liveSince >= this.#longestDelay()) this.#failures = 0
        this.#o.metrics.upstreamStreams.dec()
        res.body.destroy()
      }
    } catch (err) {
      if (why === INTERRUPTED || this.#stopped) return { kind: 'interrupted' }
      if (err instanceof BusFailure) return { kind: 'bus_failed', err: err.cause }
      if (err instanceof OwnFault) return { kind: 'faulted', err: err.cause }
      if (why === STALLED) return { kind: 'stalled', live }
      if (isAddressRefused(err)) return { kind: 'address_refused' }
      // Refused connection, reset, DNS: the runtime is not there (yet), or the stream broke mid-way.
      return live ? { kind: 'dropped', live } : { kind: 'not_up' }
    } finally {
      if (idle !== undefined) clearTimeout(idle)
      this.#interrupt = null
    }
  }

  #longestDelay(): number {
    return this.#o.timing.backoffMs[this.#o.timing.backoffMs.length - 1] ?? 10_000
  }

  /**
   * Parses the body and appends each chunk's messages to the bus in one call (so a viewer gets one write
   * per chunk). Reading pauses while an append or a trace fill is in flight, which is the backpressure.
   */
  async #consume(
    body: AsyncIterable<Buffer>,
    head: StreamHead | null,
    session: Session,
    onBytes: () => void,
  ): Promise<'closed' | 'lease_lost' | 'ended'> {
    const { bus, fence, log, metrics } = this.#o
    const kasmId = this.kasmId
    const echo = tokenEcho(session.messagingToken)
    let run = head?.run
    let last = head?.seq ?? 0
    /** The run this connection serves, from its latest `: run <id>` comment. */
    let announced: string | undefined
    let pending: BusMessage[] = []
    let closed = false
    // An event over the cap: the parser drops what it buffered of it and stops (`overflowed`); it is reset
    // and the rest of that event is read past. The gap it leaves before the next event is known, not lost.
    let overflowed = false
    let skipping = false
    let skippedTo: number | undefined
    const max = this.#o.maxEventBytes
    const skip = (seq: number | undefined): void => {
      metrics.oversized.inc({ source: 'stream' })
      log.warn(
        { kasmId, seq, maxBytes: max },
        'event over GATEWAY_EVENT_MAX_BYTES skipped; viewers see a gap',
      )
    }
    const parser = createParser({
      maxBufferSize: max,
      onError: (err) => {
        if (err.type === 'max-buffer-size-exceeded') overflowed = true
      },
      onEvent: (e: EventSourceMessage) => {
        if (closed) return
        if (e.event === 'closed') {
          const which = announced ?? run
          if (which !== undefined) pending.push({ kind: 'closed', run: which })
          closed = true
          return
        }
        const id = e.id === undefined ? null : parseEventId(e.id)
        if (id === null) {
          log.debug({ kasmId, type: e.event }, 'upstream event without a run:seq id skipped')
          return
        }
        if (skipping) {
          skipping = false
          skippedTo = id.seq - 1
        }
        // Whole in one chunk, an event is parsed before the parser's bound applies: the same cap, in bytes.
        if (e.data.length > max || (e.data.length * 3 > max && Buffer.byteLength(e.data) > max)) {
          skip(id.seq)
          skippedTo = id.seq
          return
        }
        const { text: data, echoes } = echo.maskText(e.data)
        if (echoes > 0) {
          metrics.tokenEchoes.inc({ where: 'event' }, echoes)
          log.warn({ kasmId, seq: id.seq, echoes }, 'session runtime echoed its token in an event; masked')
        }
        pending.push({ kind: 'event', run: id.run, seq: id.seq, type: e.event ?? 'message', data })
      },
      onComment: (comment: string) => {
        // `: run <id>` names the run served from here on (events carry it in their id too; `closed` does not).
        const match = /^ ?run (\S+)$/.exec(comment)
        if (match?.[1] !== undefined) {
          announced = match[1]
          log.debug({ kasmId, run: announced }, 'upstream run announced')
        }
      },
    })
    const decoder = new TextDecoder()
    // Only reading `body` fails because of the runtime (its stream dropped or broke): what our parsing and
    // gap filling throw is a bug of ours, what the append throws is the bus's, each reported as what it is.
    for await (const chunk of body) {
      onBytes()
      let filled: BusMessage[]
      try {
        parser.feed(decoder.decode(chunk, { stream: true }))
        if (overflowed) {
          overflowed = false
          parser.reset()
          if (!skipping) skip(undefined)
          skipping = true
        }
        if (pending.length === 0) continue
        const batch = pending
        pending = []
        // Events skipped for their size are a gap of our own making: not one to fill from the trace.
        if (skippedTo !== undefined) last = Math.max(last, skippedTo)
        skippedTo = undefined
        filled = await this.#fillGaps(batch, run, last, session)
        for (const m of filled) {
          if (m.kind === 'event') {
            run = m.run
            last = m.seq
          }
        }
      } catch (err) {
        throw new OwnFault(err)
      }
      let stored: boolean
      try {
        stored = await bus.append(kasmId, filled, fence)
      } catch (err) {
        throw new BusFailure(err)
      }
      if (!stored) return 'lease_lost'
      this.#failures = 0
      log.debug({ kasmId, run, count: filled.length, to: last, types: typesOf(filled) }, 'events appended')
      if (closed) {
        log.info({ kasmId, run }, 'run closed its trace without done; waiting for a new run')
        return 'closed'
      }
    }
    return 'ended'
  }

  /**
   * Inserts the events the runtime could not replay (its buffer had moved on) from trace.jsonl, when the
   * trace still is that run's. Otherwise the batch is kept as it is and viewers see the gap.
   */
  async #fillGaps(
    batch: BusMessage[],
    run: string | undefined,
    last: number,
    session: Session,
  ): Promise<BusMessage[]> {
    const first = batch[0]
    if (
      first?.kind !== 'event' ||
      run === undefined ||
      first.run !== run ||
      first.seq <= last + 1 ||
      last === 0
    ) {
      return batch
    }
    this.#o.log.info(
      { kasmId: this.kasmId, run, from: last + 1, to: first.seq - 1 },
      'filling a gap from the trace',
    )
    const filled = await this.#o.backfill.fill(session, run, last + 1, first.seq - 1)
    if (filled === null) {
      this.#o.log.warn({ kasmId: this.kasmId, run, from: last + 1, to: first.seq - 1 }, 'gap left unfilled')
      this.#o.metrics.gapsUnfilled.inc()
      return batch
    }
    return [...filled.map((d) => d.message), ...batch]
  }

  /**
   * After `event: closed`: asks `GET inbox` every `closedPollMs` which run is served, and returns when it is
   * another one (a runtime without an inbox, 404, is probed through the event stream instead).
   */
  async #waitForNewRun(closedRun: string): Promise<Outcome> {
    for (let first = true; !this.#stopped; first = false) {
      if (!first || this.#connections > 0) {
        if ((await this.#sleep(this.#o.timing.closedPollMs)) === INTERRUPTED && this.#stopped) {
          return { kind: 'interrupted' }
        }
      }
      const session = await this.#o.session()
      if (session === undefined) return { kind: 'session_removed' }
      const served = await this.#servedRun(session)
      if (served === 'no_inbox') return { kind: 'closed' }
      if (served !== null && served !== closedRun) {
        this.#o.log.info({ kasmId: this.kasmId, run: served }, 'new run after a closed trace')
        this.#o.metrics.reconnects.inc({ reason: 'new_run' })
        return { kind: 'closed' }
      }
    }
    return { kind: 'interrupted' }
  }

  async #servedRun(session: Session): Promise<string | null | 'no_inbox'> {
    const abort = new AbortController()
    this.#interrupt = () => abort.abort()
    try {
      const res = await request(new URL('inbox', session.upstream), {
        dispatcher: this.#o.dispatcherFor(session),
        method: 'GET',
        headers: { accept: 'application/json', [TOKEN_HEADER]: session.messagingToken.reveal() },
        signal: abort.signal,
      })
      if (res.statusCode === 404) {
        await res.body.dump().catch(() => {})
        return 'no_inbox'
      }
      if (res.statusCode !== 200) {
        await res.body.dump().catch(() => {})
        if (res.statusCode === 401 || res.statusCode === 403) {
          this.#o.metrics.upstreamErrors.inc({ reason: 'token_refused' })
        }
        return null
      }
      const body = (await res.body.json()) as { run?: unknown }
      return typeof body.run === 'string' ? body.run : null
    } catch {
      return null
    } finally {
      this.#interrupt = null
    }
  }

  /** Waits `ms`, or less when interrupted; says which. */
  #sleep(ms: number): Promise<symbol | null> {
    if (this.#stopped) return Promise.resolve(INTERRUPTED)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.#interrupt = null
        resolve(null)
      }, ms)
      timer.unref()
      this.#interrupt = (why) => {
        clearTimeout(timer)
        this.#interrupt = null
        resolve(why)
      }
    })
  }
}

/** What the bus threw while appending: its store is away or failing, which is not the runtime's doing. */
class BusFailure extends Error {
  constructor(cause: unknown) {
    super('event bus append failed', { cause })
    this.name = 'BusFailure'
  }
}

/** Distinct event types of a batch, for a log line that carries no payload. */
function typesOf(batch: readonly BusMessage[]): string[] {
  const out = new Set<string>()
  for (const m of batch) out.add(m.kind === 'event' ? m.type : 'closed')
  return [...out]
}
