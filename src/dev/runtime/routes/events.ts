import type { FastifyInstance } from 'fastify'
import type { RuntimeCore } from '../core.ts'
import type { RouteAccess } from '../credentials.ts'
import { CLOSED_FRAME, runComment } from '../event-streams.ts'
import { HttpError } from '../http-error.ts'

const OBSERVE: RouteAccess = { access: 'observe', inbox: false }
const SEQ = /^\d{1,15}$/

/** Where a client asks to resume: a run id and the last seq it has. */
interface Resume {
  run: string
  after: number
}

/**
 * `Last-Event-ID: <run>:<seq>` wins over `?run=&after=`: an EventSource-style reconnect sends the header
 * with its original URL, and the header is the newer position. A malformed header is ignored.
 */
function resumeFrom(headers: Record<string, unknown>, query: Record<string, unknown>): Resume | null {
  const lastEventId = headers['last-event-id']
  if (typeof lastEventId === 'string') {
    const colon = lastEventId.lastIndexOf(':')
    const seq = lastEventId.slice(colon + 1)
    if (colon > 0 && SEQ.test(seq)) return { run: lastEventId.slice(0, colon), after: Number(seq) }
  }
  const after = query.after
  if (after !== undefined && (typeof after !== 'string' || !SEQ.test(after))) {
    throw new HttpError(400, 'invalid_after', 'after must be a non-negative integer sequence number')
  }
  if (typeof query.run === 'string' && after !== undefined) return { run: query.run, after: Number(after) }
  return null
}

/**
 * GET /events: `: run <id>`, then the buffered events after the client's position when it names the run
 * being served (else the whole buffer of the current run), then live frames and pings. A trace closed
 * without `done` replays and ends with `event: closed`. A trace that ended with `done` stays open for a
 * next run in the same session.
 */
export function eventRoutes(app: FastifyInstance, core: RuntimeCore): void {
  app.get('/events', { config: OBSERVE }, (request, reply) => {
    const resume = resumeFrom(request.headers, request.query as Record<string, unknown>)
    const trace = core.current.trace
    const events = trace.replay(resume !== null && resume.run === trace.run ? resume.after : undefined)
    const closed = trace.ending === 'closed'
    reply.hijack()
    core.streams.attach(
      reply.raw,
      runComment(trace.run) + events.map((event) => event.frame).join('') + (closed ? CLOSED_FRAME : ''),
      closed,
    )
  })
}
