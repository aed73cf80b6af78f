import { finished, type Readable } from 'node:stream'
import { createParser, type EventSourceMessage } from 'eventsource-parser'
import type { FastifyBaseLogger } from 'fastify'
import { parseEventId } from '../protocol/events.ts'
import type { TokenEcho } from '../upstream/token-echo.ts'
import type { BusMessage } from './bus.ts'
import type { EventMetrics } from './metrics.ts'
import { OwnFault } from './own-fault.ts'

/** What one chunk of a runtime's event stream held, parsed. */
export interface ParsedChunk {
  /** The chunk's events in order, and its `closed` last if it held one. */
  readonly messages: BusMessage[]
  /** The highest seq skipped for its size since the last chunk (a gap of the gateway's making), if any. */
  readonly skippedTo: number | undefined
  /** The run closed: nothing after this chunk is read. */
  readonly closed: boolean
}

/** How {@link parsedChunks} reads one connection's body. */
export interface ParseOptions {
  readonly kasmId: string
  /** The run stored before this connection (the run a `closed` belongs to when none was announced). */
  readonly run: string | undefined
  /** GATEWAY_EVENT_MAX_BYTES: a larger event is skipped and counted, never buffered whole. */
  readonly maxEventBytes: number
  /** Masks the session's messaging token, should the runtime echo it in an event. */
  readonly echo: TokenEcho
  readonly log: FastifyBaseLogger
  readonly metrics: Pick<EventMetrics, 'oversized' | 'tokenEchoes'>
  /** Called for every chunk read (the idle timer's heartbeat). */
  readonly onBytes: () => void
}

/**
 * The parser of one connection to a runtime's `GET events`: `feed` takes each chunk as it comes and returns
 * what it held, or null for a chunk of no event (a comment, part of an event), so what a chunk carried is
 * appended, and reaches a viewer, in one piece. Synchronous: what it throws is the gateway's, an
 * {@link OwnFault}. Events without a `run:seq` id are skipped; `: run <id>` names the run a later `closed`
 * belongs to.
 */
export function chunkParser(options: ParseOptions): { feed(chunk: Buffer): ParsedChunk | null } {
  const { kasmId, echo, log, metrics } = options
  const max = options.maxEventBytes
  let run = options.run
  /** The run this connection serves, from its latest `: run <id>` comment. */
  let announced: string | undefined
  let pending: BusMessage[] = []
  let closed = false
  // An event over the cap: the parser drops what it buffered of it and stops (`overflowed`); it is reset
  // and the rest of that event is read past. The gap it leaves before the next event is known, not lost.
  let overflowed = false
  let skipping = false
  let skippedTo: number | undefined
  // An event's id is a slice of the chunk it came in: a run kept from it (here, by the reader, by its last
  // message) keeps that whole chunk alive until the next one, a second later at one event a second, long
  // enough for young collections to copy it and then promote it. Each new run is copied once instead.
  let lastRun: string | undefined
  const ownRun = (r: string): string => {
    if (r !== lastRun) lastRun = Buffer.from(r).toString()
    return lastRun
  }
  const skip = (seq: number | undefined): void => {
    metrics.oversized.inc({ source: 'stream' })
    log.warn({ kasmId, seq, maxBytes: max }, 'event over GATEWAY_EVENT_MAX_BYTES skipped; viewers see a gap')
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
      pending.push({ kind: 'event', run: ownRun(id.run), seq: id.seq, type: e.event ?? 'message', data })
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
  return {
    feed(chunk: Buffer): ParsedChunk | null {
      if (closed) return null
      options.onBytes()
      try {
        parser.feed(decoder.decode(chunk, { stream: true }))
        if (overflowed) {
          overflowed = false
          parser.reset()
          if (!skipping) skip(undefined)
          skipping = true
        }
      } catch (err) {
        throw new OwnFault(err)
      }
      if (pending.length === 0) return null
      const messages = pending
      pending = []
      const skipped = skippedTo
      skippedTo = undefined
      // A `closed` without an announcement belongs to the run of the last chunk (as the caller stored it).
      for (const m of messages) if (m.kind === 'event') run = m.run
      return { messages, skippedTo: skipped, closed }
    },
  }
}

function ignore(): void {}

/**
 * Reads one connection's body, handing each chunk that held events ({@link chunkParser}) to `handle`; the body
 * is paused until that settles (the backpressure), and reading stops when it returns false or after a chunk
 * with `closed`. Pushed by the body's own `data` events, so a connection waiting for the run's next event
 * holds no promise: with thousands of sessions at one event a second, promises that waited a second each
 * lived through young collections and were promoted. What reading the body fails with is the runtime's (its
 * stream dropped or broke: ERR_STREAM_PREMATURE_CLOSE when it ended short) and passes as it is; what the
 * parsing throws is an {@link OwnFault}; what `handle` rejects with passes as it is.
 */
export function readChunks(
  body: Readable,
  options: ParseOptions,
  handle: (chunk: ParsedChunk) => Promise<boolean>,
): Promise<void> {
  const parser = chunkParser(options)
  return new Promise((resolve, reject) => {
    /** A chunk is being handled: the body's end (or failure) waits for it. */
    let handling = false
    let ended: { err: unknown } | null = null
    let settled = false
    const settle = (err?: unknown): void => {
      if (settled) return
      settled = true
      body.off('data', onData)
      stopWatching()
      // The caller destroys the body next; a socket failing before that must not go unheard.
      body.on('error', ignore)
      if (err === undefined || err === null) resolve()
      else reject(err)
    }
    const onData = (chunk: Buffer): void => {
      let parsed: ParsedChunk | null
      try {
        parsed = parser.feed(chunk)
      } catch (err) {
        settle(err)
        return
      }
      if (parsed === null) return
      const { closed } = parsed
      handling = true
      body.pause()
      handle(parsed).then(
        (more) => {
          handling = false
          if (!more || closed) settle()
          else if (ended !== null) settle(ended.err)
          else body.resume()
        },
        (err: unknown) => {
          handling = false
          settle(err)
        },
      )
    }
    const stopWatching = finished(body, { writable: false }, (err) => {
      if (handling) ended = { err }
      else settle(err)
    })
    body.on('data', onData)
  })
}
