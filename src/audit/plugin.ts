import type { FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { redisAuditLog } from '../cluster/stores.ts'
import { toErrorBody } from '../errors.ts'
import { MemoryAuditLog } from './memory-log.ts'
import { auditTarget } from './target.ts'
import type { AuditDetail, AuditLog, AuditRecord } from './types.ts'

declare module 'fastify' {
  interface FastifyInstance {
    audit: AuditLog
  }
  interface FastifyRequest {
    /** Filled by the route that handles a write (session, v1 route, key, action, upstream status). */
    auditDetail: AuditDetail
  }
}

/**
 * Decorates `app.audit` and records every write under `/desktop/` and `/admin/`, forwarded or refused, in
 * one onResponse hook: refusals by auth, rate limit or body limit happen before any route and are recorded
 * from the URL. Each record is also an info log line `{audit: record}`.
 */
export const auditPlugin = fp(
  async (app) => {
    const log: AuditLog = redisAuditLog(app) ?? new MemoryAuditLog(app.config.env.GATEWAY_AUDIT_RECORDS)
    app.decorate('audit', log)
    // Fastify refuses an object default (it would be shared by every request): null, then one per request.
    app.decorateRequest('auditDetail', null as unknown as AuditDetail)
    app.addHook('onRequest', async (request) => {
      request.auditDetail = {}
    })
    app.addHook('onError', async (request, _reply, error) => {
      if (request.auditDetail) request.auditDetail.error ??= toErrorBody(error).body.error
    })
    app.addHook('onResponse', async (request, reply) => {
      const record = buildRecord(request, reply)
      if (record === null) return
      log.record(record)
      request.log.info({ audit: record }, 'audit')
    })
  },
  { name: 'audit' },
)

function buildRecord(request: FastifyRequest, reply: FastifyReply): AuditRecord | null {
  const target = auditTarget(request.method, request.url)
  if (target === null) return null
  const detail: AuditDetail = request.auditDetail ?? {}
  const status = reply.statusCode
  let error = detail.error
  // The not-found handler answers without throwing, so no onError hook saw it.
  if (
    error === undefined &&
    status === 404 &&
    detail.upstreamStatus === undefined &&
    !request.routeOptions.url
  )
    error = 'route_not_found'
  const refused = status >= 400 && detail.upstreamStatus === undefined
  const latencyMs = Math.round(reply.elapsedTime * 10) / 10
  const record: AuditRecord = {
    at: new Date(Date.now() - reply.elapsedTime).toISOString(),
    requestId: request.id,
    sub: request.operator?.sub ?? null,
    kasmId: detail.kasmId ?? target.kasmId,
    method: request.method,
    route: detail.route ?? target.route,
    outcome: refused ? 'refused' : 'forwarded',
    status,
    latencyMs,
  }
  if (detail.key !== undefined) record.key = detail.key
  if (detail.action !== undefined) record.action = detail.action
  if (detail.upstreamStatus !== undefined) record.upstreamStatus = detail.upstreamStatus
  if (error !== undefined) record.error = error
  return record
}
