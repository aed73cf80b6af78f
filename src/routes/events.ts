import type { FastifyInstance } from 'fastify'
import { BadRequest, SessionNotFound, ShuttingDown, StoreUnavailable, Unauthenticated } from '../errors.ts'
import type { StreamPosition } from '../events/bus.ts'
import { countWhenClosed } from '../metrics/streams.ts'
import { parseEventId } from '../protocol/events.ts'
import { KASM_ID } from '../sessions/types.ts'

interface EventsRoute {
  Params: { kasmId: string }
  Querystring: Record<string, string | string[] | undefined>
}

/** A run id as the protocol uses it: printable, no spaces or control characters, bounded. */
export const RUN_ID = /^[\x21-\x7e]{1,200}$/

/**
 * `GET /desktop/:kasmId/mcp/events`: the session's event stream in the sidebar protocol's wire format, from
 * the gateway's one upstream reader per session. `after=<seq>&run=<run_id>` or `Last-Event-ID: <run>:<seq>`
 * (which wins: EventSource sends it on reconnect with the original URL) replays the missed events. A
 * malformed `after` or `run` is refused with 400, as the runtime does; during a Redis outage (cluster mode) a
 * new stream is refused with 503 `store_unavailable` before it opens.
 */
export async function eventsRoutes(app: FastifyInstance): Promise<void> {
  app.get<EventsRoute>(
    '/desktop/:kasmId/mcp/events',
    { onRequest: app.requireAccess('read') },
    async (request, reply) => {
      const operator = request.operator
      if (operator === null) throw new Unauthenticated()
      const { kasmId } = request.params
      if (!KASM_ID.test(kasmId)) throw new SessionNotFound()
      const session = await app.sessions.resolve(kasmId, operator)
      const position = streamPosition(request.query, request.headers['last-event-id'])
      if (app.readiness.draining) throw new ShuttingDown()
      // Refused before the stream opens, so a client can tell it from a drop: its replay cannot be read now.
      if (app.events.storeDown()) throw new StoreUnavailable('the event history cannot be read')
      const reservation = await app.events.streams.reserve(operator)
      reply.hijack()
      try {
        const socket = app.events.takeover.take(request.raw, reply.raw)
        countWhenClosed(app, request, reply, socket)
        await app.events.streams.open(session.kasmId, reservation, socket, position, request.id)
      } catch (err) {
        // Harmless when the stream opened and already gave it back.
        reservation.release()
        request.log.error({ err }, 'event stream failed to open')
        request.raw.socket.destroy()
      }
    },
  )
}

/** The viewer's position from the header or else the query; a malformed query is refused with 400. */
export function streamPosition(
  query: Record<string, string | string[] | undefined>,
  lastEventId: string | string[] | undefined,
): StreamPosition {
  // Like the runtime, a Last-Event-ID that is not `<run>:<seq>` (EventSource sends '' before any id) is
  // ignored rather than refused: the query's position, or none, applies.
  const id = typeof lastEventId === 'string' ? parseEventId(lastEventId) : null
  if (id !== null && RUN_ID.test(id.run)) return { run: id.run, after: id.seq }
  const { after, run } = query
  if (Array.isArray(after) || Array.isArray(run)) throw new BadRequest('after and run may appear once each')
  const position: { run?: string; after?: number } = {}
  if (after !== undefined && after !== '') {
    if (!/^\d{1,15}$/.test(after)) throw new BadRequest('after must be a non-negative integer')
    position.after = Number(after)
  }
  if (run !== undefined && run !== '') {
    if (!RUN_ID.test(run)) throw new BadRequest('run must be a run id')
    position.run = run
  }
  return position
}
