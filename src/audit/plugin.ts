import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { seesTeam } from '../auth/operator.ts'
import { toErrorBody } from '../errors.ts'
import type { AuditStreams } from './streams.ts'
import { auditTarget } from './target.ts'
import type { AuditDetail, AuditRecord } from './types.ts'

declare module 'fastify' {
  interface FastifyInstance {
    audit: AuditStreams
  }
  interface FastifyRequest {
    /** Filled by the route that handles a write (session, v1 route, key, action, upstream status). */
    auditDetail: AuditDetail
    /** `performance.now()` when the request arrived, for the latency of an aborted request. */
    auditStartedAt: number
  }
}

/**
 * Refusals that are counted instead of recorded: the per-address limit of requests without a credential
 * (`krg_anonymous_requests_limited_total`, one sampled log line), which answers a flood before anything else.
 */
const UNRECORDED: ReadonlySet<string> = new Set(['anonymous_rate_limited'])

/**
 * Decorates `app.audit` and records, in one onResponse hook, every request of a route that names itself in
 * its `config.audit` (see target.ts), forwarded or refused: refusals by auth, rate limit or body limit happen
 * before the handler but after routing, so they carry the route's name; and every write under `/desktop/` or
 * `<base>admin/` that no route serves. Each record is also an info log line `{audit: record}`.
 *
 * A forwarded request of an authenticated caller goes to the trail; every other one (refused, aborted, or made
 * with no credential) to the refusals, bounded apart ({@link AuditStreams}), so no flood of them can push an
 * authenticated action out. A record takes its session's team only when its caller is authenticated and
 * belongs to that team: an anonymous or foreign caller cannot write into a team's audit view.
 */
export const auditPlugin = fp(
  async (app) => {
    const log = app.stores.audit
    app.decorate('audit', log)
    // Fastify refuses an object default (it would be shared by every request): null, then one per request.
    app.decorateRequest('auditDetail', null as unknown as AuditDetail)
    app.decorateRequest('auditStartedAt', 0)
    // Callback-style, as every hook each request passes: no promise per request.
    app.addHook('onRequest', (request, _reply, done) => {
      request.auditDetail = {}
      request.auditStartedAt = performance.now()
      done()
    })
    app.addHook('onError', async (request, _reply, error) => {
      if (request.auditDetail) request.auditDetail.error ??= toErrorBody(error).body.error
    })
    const write = (request: FastifyRequest, record: AuditRecord): void => {
      if (request.auditDetail?.recorded) return
      if (request.auditDetail) request.auditDetail.recorded = true
      const authenticated = request.operator !== null || request.auditDetail?.authenticated === true
      if (record.outcome === 'forwarded' && authenticated) log.record(record)
      else log.recordRefusal(record)
      request.log.info({ audit: record }, 'audit')
    }
    const base = app.config.basePath
    /**
     * The record with its session's team, which an admin limited to teams filters on: at once when the route
     * resolved the session (the usual write), else looked up; none when the caller is not of that team (or
     * not authenticated), whatever the URL or the route named.
     */
    const withTeam = (record: AuditRecord, request: FastifyRequest): AuditRecord | Promise<AuditRecord> => {
      // The record is this request's own, not written yet: completed in place.
      const operator = request.operator
      const ofCaller = (team: string | null | undefined): string | null =>
        team != null && operator !== null && seesTeam(operator, team) ? team : null
      const named = request.auditDetail?.team
      record.team = ofCaller(named)
      if (named !== undefined || operator === null || record.kasmId === null) return record
      return app.sessions.get(record.kasmId).then(
        (session) => {
          record.team = ofCaller(session?.team)
          return record
        },
        () => record,
      )
    }
    app.addHook('onResponse', (request, reply, done) => {
      const record = buildRecord(request, reply, base)
      // Reads are not recorded: they finish here, without a promise; so do writes whose team is known.
      if (record === null || (record.error !== undefined && UNRECORDED.has(record.error))) return done()
      const complete = withTeam(record, request)
      if (!(complete instanceof Promise)) {
        write(request, complete)
        return done()
      }
      complete.then((withIt) => {
        write(request, withIt)
        done()
      }, done)
    })
    // A client that goes away mid-request (an upload given up) gets no response, so no onResponse either.
    app.addHook('onRequestAbort', async (request) => {
      const record = buildRecord(request, null, base)
      if (record !== null) write(request, await withTeam(record, request))
    })
  },
  { name: 'audit', dependencies: ['sessions', 'stores'] },
)

/** The record of a request; `reply` is null when the client aborted before any answer. */
function buildRecord(
  request: FastifyRequest,
  reply: FastifyReply | null,
  basePath: string,
): AuditRecord | null {
  const target = auditTarget(request, basePath)
  if (target === null) return null
  const detail: AuditDetail = request.auditDetail ?? {}
  const status = reply === null ? 499 : reply.statusCode
  let error = detail.error
  // The not-found handler answers without throwing, so no onError hook saw it.
  if (reply === null) error ??= 'client_aborted'
  else if (
    error === undefined &&
    status === 404 &&
    detail.upstreamStatus === undefined &&
    !request.routeOptions.url
  )
    error = 'route_not_found'
  const refused = status >= 400 && detail.upstreamStatus === undefined
  const elapsed = reply === null ? performance.now() - request.auditStartedAt : reply.elapsedTime
  const latencyMs = Math.round(elapsed * 10) / 10
  const record: AuditRecord = {
    at: new Date(Date.now() - elapsed).toISOString(),
    requestId: request.id,
    clientIp: request.ip,
    sub: request.operator?.sub ?? detail.sub ?? null,
    kasmId: detail.kasmId ?? target.kasmId,
    method: request.method,
    route: detail.route ?? target.route,
    outcome: reply === null ? 'aborted' : refused ? 'refused' : 'forwarded',
    status,
    latencyMs,
  }
  if (request.operator?.name !== undefined) record.name = request.operator.name
  if (detail.key !== undefined) record.key = detail.key
  if (detail.run !== undefined) record.run = detail.run
  if (detail.replyTo !== undefined) record.replyTo = detail.replyTo
  if (detail.question !== undefined) record.question = detail.question
  if (detail.action !== undefined) record.action = detail.action
  if (detail.via !== undefined) record.via = detail.via
  if (detail.upstreamStatus !== undefined) record.upstreamStatus = detail.upstreamStatus
  if (error !== undefined) record.error = error
  if (detail.reason !== undefined) record.reason = detail.reason
  return record
}
