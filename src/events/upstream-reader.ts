import type { Readable } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import { type Dispatcher, request } from 'undici'
import type { Env } from '../config.ts'
import type { Session } from '../sessions/types.ts'
import { tracedRequest } from '../tracing/spans.ts'
import { TOKEN_HEADER } from '../upstream/agent.ts'
import { tokenEcho } from '../upstream/token-echo.ts'
import { isAddressRefused } from '../upstream/url-policy.ts'
import type { BusMessage, EventBus, StreamHead } from './bus.ts'
import { type ReadMessage, readChannel, storedChannel } from './diagnostics.ts'
import type { EventMetrics } from './metrics.ts'
import { OwnFault } from './own-fault.ts'
import { ReconnectPolicy, type ReconnectTiming } from './reconnect-policy.ts'
import type { TraceBackfill } from './trace-backfill.ts'
import { readChunks } from './upstream-events.ts'

/** The reader's delays, from the protocol's advice for a sidebar (scaled down in tests). */
export interface ReaderTiming extends ReconnectTiming {
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
  | { kind: 'dropped' }
  | { kind: 'stalled' }
  | { kind: 'bus_unavailable'; err: unknown }
  | { kind: 'bus_failed'; err: unknown }
  | { kind: 'faulted'; err: unknown }
  | { kind: 'closed' }
  | { kind: 'interrupted' }
  | { kind: 'lease_lost' }
  | { kind: 'session_removed' }

/** The reason a connection is aborted when the runtime went silent for `idleTimeoutMs`. */
const STALLED = Symbol('stalled')

/**
 * The one SSE client of a session's runtime: reads `GET <upstream>events` with the messaging token, appends
 * what it reads to the bus (in order, per chunk), and reconnects with `after=<last seq>&run=<run>` so
 * nothing is lost. Reconnection follows the protocol ({@link ReconnectPolicy}): poll every 1.5 s while the
 * runtime is not up, back off 1, 2, 4.. 10 s after a live stream dropped, treat 45 s of silence as a dead
 * stream, and after `event: closed` wait (polling `GET inbox`) for a new run. A gap the runtime's replay
 * cannot fill is filled from `artifacts/trace.jsonl` when possible. Payloads are never logged: types and
 * sequence numbers only.
 *
 * Waiting is cancelled by aborting: one controller for the reader's life ({@link stop}) and one per attempt
 * (a connection or a wait for a new run, and the delay after it), which {@link restart} aborts; whatever the
 * attempt waits on (the request, the inbox poll, a delay) ends at once.
 */
export class UpstreamReader {
  readonly kasmId: string
  readonly #o: UpstreamReaderOptions
  #state: ReaderState = 'starting'
  /** Aborted by {@link stop}: the reader is done. */
  readonly #life = new AbortController()
  /** The current attempt's controller, aborted by {@link restart} (and {@link stop}). */
  #attempt = new AbortController()
  #loop: Promise<void> | null = null
  readonly #policy: ReconnectPolicy
  #connections = 0
  #health: ReaderHealth | null = null

  constructor(options: UpstreamReaderOptions) {
    this.kasmId = options.kasmId
    this.#o = options
    this.#policy = new ReconnectPolicy(options.timing)
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
    if (this.#loop !== null || this.#life.signal.aborted) return
    this.#loop = this.#run().catch((err: unknown) => {
      this.#o.log.error({ err, kasmId: this.kasmId }, 'event reader failed')
    })
  }

  /** Reconnects now (token rotated, upstream moved): ends the current stream or wait at once. */
  restart(): void {
    this.#policy.reset()
    this.#attempt.abort()
  }

  /** Stops reading and resolves once the loop has exited and its connection is closed. */
  async stop(): Promise<void> {
    this.#life.abort()
    this.#attempt.abort()
    await this.#loop
    this.#state = 'stopped'
  }

  async #run(): Promise<void> {
    const life = this.#life.signal
    let restarted = false
    while (!life.aborted) {
      const attempt = new AbortController()
      this.#attempt = attempt
      const outcome = await this.#try(attempt.signal, restarted)
      if (life.aborted) break
      if (outcome.kind === 'lease_lost' || outcome.kind === 'session_removed') {
        this.#life.abort()
        this.#state = 'stopped'
        const level = this.#o.storeOutage?.() ? 'debug' : 'warn'
        this.#o.log[level]({ kasmId: this.kasmId, why: outcome.kind }, 'event reader stopped')
        this.#o.onStop?.(outcome.kind)
        break
      }
      await this.#afterOutcome(outcome, attempt.signal)
      restarted = attempt.signal.aborted
    }
    this.#state = 'stopped'
  }

  /** One attempt: from the bus's head, wait for a new run if the stored one closed, then connect. */
  async #try(signal: AbortSignal, restarted: boolean): Promise<Outcome> {
    let head: StreamHead | null
    try {
      head = await this.#o.bus.head(this.kasmId)
    } catch (err) {
      return { kind: 'bus_unavailable', err }
    }
    if (head?.closed) {
      this.#state = 'closed'
      const waited = await this.#waitForNewRun(head.run, signal, restarted)
      if (waited !== null) return waited
    }
    return this.#connect(head, signal)
  }

  /** Counts, logs and waits as the outcome asks. */
  async #afterOutcome(outcome: Outcome, signal: AbortSignal): Promise<void> {
    const { metrics, log, timing } = this.#o
    const kasmId = this.kasmId
    const policy = this.#policy
    switch (outcome.kind) {
      case 'closed':
      case 'interrupted':
      case 'lease_lost':
      case 'session_removed':
        return
      case 'bus_unavailable': {
        // The bus's store is down (cluster mode): nothing can be appended anyway; try again shortly.
        const level = this.#o.storeOutage?.() ? 'debug' : 'warn'
        log[level]({ err: outcome.err, kasmId }, 'event bus unavailable; reader waiting')
        this.#state = 'retrying'
        await sleep(policy.longestMs, signal)
        return
      }
      case 'refused':
        metrics.reconnects.inc({ reason: 'token_refused' })
        metrics.upstreamErrors.inc({ reason: 'token_refused' })
        log.warn(
          { kasmId, status: outcome.status },
          'runtime refused the messaging token; retrying slowly until it is rotated',
        )
        this.#state = 'retrying'
        this.#report('token_refused')
        await sleep(timing.refusedRetryMs, signal)
        return
      case 'address_refused':
        metrics.reconnects.inc({ reason: 'address_refused' })
        metrics.upstreamErrors.inc({ reason: 'address_refused' })
        log.warn({ kasmId }, 'upstream resolves to an address the URL policy refuses; retrying slowly')
        this.#state = 'retrying'
        await sleep(timing.refusedRetryMs, signal)
        return
      case 'not_up':
        metrics.reconnects.inc({ reason: 'not_up' })
        metrics.upstreamErrors.inc({ reason: 'unreachable' })
        // After a live stream dropped, a runtime that does not answer is gone rather than not up yet.
        this.#report(policy.backingOff ? 'unreachable' : 'not_up')
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
        policy.dropped()
        log.info({ kasmId }, 'upstream event stream dropped; reconnecting')
        break
      case 'stalled':
        metrics.reconnects.inc({ reason: 'stalled' })
        metrics.upstreamErrors.inc({ reason: 'stream_stalled' })
        policy.dropped()
        log.warn({ kasmId, idleMs: timing.idleTimeoutMs }, 'upstream event stream silent; reconnecting')
        break
      case 'bus_failed': {
        // Not the runtime's doing: its stream is let go and read again (from the bus's head) once the bus
        // answers, on the same schedule as a bus that is away when the reader starts.
        metrics.reconnects.inc({ reason: 'bus_failed' })
        const level = this.#o.storeOutage?.() ? 'debug' : 'warn'
        log[level]({ err: outcome.err, kasmId }, 'event bus append failed; reader waiting for the bus')
        this.#state = 'retrying'
        await sleep(policy.longestMs, signal)
        return
      }
      case 'faulted':
        metrics.reconnects.inc({ reason: 'internal_error' })
        policy.dropped()
        log.error({ err: outcome.err, kasmId }, 'event reader failed on the upstream stream; reconnecting')
        break
    }
    this.#state = 'retrying'
    await sleep(policy.nextDelayMs(), signal)
  }

  /** One connection: headers, then chunks until it ends, stalls, closes its run or is interrupted. */
  async #connect(head: StreamHead | null, signal: AbortSignal): Promise<Outcome> {
    const session = await this.#o.session()
    if (session === undefined) return { kind: 'session_removed' }
    if (signal.aborted) return { kind: 'interrupted' }
    this.#state = 'connecting'
    const url = new URL('events', session.upstream)
    if (head !== null) {
      if (head.seq > 0) url.searchParams.set('after', String(head.seq))
      url.searchParams.set('run', head.run)
    }
    // Aborted with the attempt, or by the idle timer (then its reason is STALLED).
    const connection = childController(signal)
    let idle: NodeJS.Timeout | undefined
    let live = false
    try {
      this.#connections++
      const res = await tracedRequest('events', { 'krg.kasm_id': this.kasmId }, url, {
        dispatcher: this.#o.dispatcherFor(session),
        method: 'GET',
        headers: { accept: 'text/event-stream', [TOKEN_HEADER]: session.messagingToken.reveal() },
        signal: connection.signal,
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
      this.#policy.connected()
      this.#state = 'live'
      this.#report('live')
      this.#o.metrics.upstreamStreams.inc()
      const liveSince = Date.now()
      // A timer that fires late because this process stalled (a long GC, a starved CPU) runs before the bytes that
      // came meanwhile are read: it looks again after them (setImmediate follows the pending I/O) before taking
      // the silence for the runtime's. Otherwise one pause would replace every healthy stream of the replica.
      let heard = 0
      idle = setTimeout(() => {
        const before = heard
        setImmediate(() => {
          if (heard === before) connection.abort(STALLED)
        })
      }, this.#o.timing.idleTimeoutMs)
      idle.unref()
      try {
        const ended = await this.#consume(res.body, head, session, () => {
          heard++
          idle?.refresh()
        })
        if (ended === 'closed') return { kind: 'closed' }
        if (ended === 'lease_lost') return { kind: 'lease_lost' }
        return { kind: 'dropped' }
      } finally {
        // A stream that lived long was healthy (one that carried events resets as it appends them): the next
        // drop starts the backoff at 1 s again.
        if (Date.now() - liveSince >= this.#policy.longestMs) this.#policy.healthy()
        this.#o.metrics.upstreamStreams.dec()
        res.body.destroy()
      }
    } catch (err) {
      if (signal.aborted) return { kind: 'interrupted' }
      if (err instanceof BusFailure) return { kind: 'bus_failed', err: err.cause }
      if (err instanceof OwnFault) return { kind: 'faulted', err: err.cause }
      if (connection.signal.reason === STALLED) return { kind: 'stalled' }
      if (isAddressRefused(err)) return { kind: 'address_refused' }
      // Refused connection, reset, DNS: the runtime is not there (yet), or the stream broke mid-way.
      return live ? { kind: 'dropped' } : { kind: 'not_up' }
    } finally {
      if (idle !== undefined) clearTimeout(idle)
      connection.dispose()
    }
  }

  /**
   * Appends each chunk's messages ({@link readChunks}) to the bus in one call, after filling a gap from the
   * trace, so a viewer gets one write per chunk. The next chunk is read once that is done (the backpressure).
   */
  async #consume(
    body: Readable,
    head: StreamHead | null,
    session: Session,
    onBytes: () => void,
  ): Promise<'closed' | 'lease_lost' | 'ended'> {
    const { bus, fence, log, metrics } = this.#o
    const kasmId = this.kasmId
    let run = head?.run
    let last = head?.seq ?? 0
    let ended: 'closed' | 'lease_lost' | 'ended' = 'ended'
    const options = {
      kasmId,
      run,
      maxEventBytes: this.#o.maxEventBytes,
      echo: tokenEcho(session.messagingToken),
      log,
      metrics,
      onBytes,
    }
    // Only reading `body` fails because of the runtime (its stream dropped or broke): what our parsing and
    // gap filling throw is a bug of ours, what the append throws is the bus's, each reported as what it is.
    await readChunks(body, options, async (chunk) => {
      let filled: BusMessage[]
      try {
        // Events skipped for their size are a gap of our own making: not one to fill from the trace.
        if (chunk.skippedTo !== undefined) last = Math.max(last, chunk.skippedTo)
        filled = await this.#fillGaps(chunk.messages, run, last, session)
        for (const m of filled) {
          if (m.kind === 'event') {
            run = m.run
            last = m.seq
          }
        }
      } catch (err) {
        throw new OwnFault(err)
      }
      if (readChannel.hasSubscribers) readChannel.publish({ kasmId, messages: filled } satisfies ReadMessage)
      let stored: boolean
      try {
        stored = await bus.append(kasmId, filled, fence)
      } catch (err) {
        throw new BusFailure(err)
      }
      if (!stored) {
        ended = 'lease_lost'
        return false
      }
      if (storedChannel.hasSubscribers)
        storedChannel.publish({ kasmId, messages: filled } satisfies ReadMessage)
      this.#policy.healthy()
      log.debug({ kasmId, run, count: filled.length, to: last, types: typesOf(filled) }, 'events appended')
      if (chunk.closed) {
        log.info({ kasmId, run }, 'run closed its trace without done; waiting for a new run')
        ended = 'closed'
      }
      return true
    })
    return ended
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
   * After `event: closed`: asks `GET inbox` every `closedPollMs` which run is served, and returns null when it
   * is another one (a runtime without an inbox, 404, is probed through the event stream instead). Asks at
   * once the first time, unless a stream was read before (then the closed run was just seen), and again at
   * once after a restart (a rotated token may see what the old one could not).
   */
  async #waitForNewRun(closedRun: string, signal: AbortSignal, restarted: boolean): Promise<Outcome | null> {
    for (let first = true; ; first = false) {
      if (!first || (this.#connections > 0 && !restarted)) {
        if (!(await sleep(this.#o.timing.closedPollMs, signal))) return { kind: 'interrupted' }
      }
      const session = await this.#o.session()
      if (session === undefined) return { kind: 'session_removed' }
      const served = await this.#servedRun(session, signal)
      if (signal.aborted) return { kind: 'interrupted' }
      if (served === 'no_inbox') return null
      if (served !== null && served !== closedRun) {
        this.#o.log.info({ kasmId: this.kasmId, run: served }, 'new run after a closed trace')
        this.#o.metrics.reconnects.inc({ reason: 'new_run' })
        return null
      }
    }
  }

  async #servedRun(session: Session, signal: AbortSignal): Promise<string | null | 'no_inbox'> {
    try {
      const res = await request(new URL('inbox', session.upstream), {
        dispatcher: this.#o.dispatcherFor(session),
        method: 'GET',
        headers: { accept: 'application/json', [TOKEN_HEADER]: session.messagingToken.reveal() },
        signal,
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
    }
  }
}

/** Waits `ms` (without keeping the process up); false when `signal` aborted the wait (or already had). */
async function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await delay(ms, undefined, { signal, ref: false })
    return true
  } catch (err) {
    if (signal.aborted) return false
    throw err
  }
}

/** A controller aborted with `parent` too; `dispose` unhooks it from the parent once it is no longer used. */
function childController(parent: AbortSignal): AbortController & { dispose(): void } {
  const child = new AbortController()
  const follow = (): void => child.abort(parent.reason)
  if (parent.aborted) follow()
  else parent.addEventListener('abort', follow, { once: true })
  return Object.assign(child, { dispose: () => parent.removeEventListener('abort', follow) })
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
