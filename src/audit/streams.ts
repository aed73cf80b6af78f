import type { AuditLog, AuditQuery, AuditRecord } from './types.ts'

/**
 * The audit log as `app.audit` holds it: two bounded streams, so that what anyone can send without a
 * credential never pushes out what people did.
 *
 * - the trail: authenticated actions the gateway let through (forwarded writes, admin changes, sign-ins and
 *   sign-outs, back-channel logouts) and the gateway's own changes (the Kasm sync's), GATEWAY_AUDIT_RECORDS;
 * - the refusals: every refused or aborted request, and what came with no credential at all,
 *   GATEWAY_AUDIT_REFUSED_RECORDS. A flood of them pushes out only older refusals.
 *
 * Reads see both as one log, the latest arrival first.
 */
export class AuditStreams implements AuditLog {
  readonly #trail: AuditLog
  readonly #refusals: AuditLog

  constructor(trail: AuditLog, refusals: AuditLog) {
    this.#trail = trail
    this.#refusals = refusals
  }

  /** A record of the trail (an authenticated action, or the gateway's own change). */
  record(record: AuditRecord): void {
    this.#trail.record(record)
  }

  /** A record of a refused, aborted or anonymous request. */
  recordRefusal(record: AuditRecord): void {
    this.#refusals.record(record)
  }

  async recent(query: AuditQuery): Promise<AuditRecord[]> {
    const [trail, refusals] = await Promise.all([this.#trail.recent(query), this.#refusals.recent(query)])
    // Each holds its records in the order they were written (as requests ended): newest first by arrival
    // instead, ids breaking ties (a replica's ids rise with its arrivals).
    return [...trail, ...refusals].sort(newestFirst).slice(0, query.limit)
  }
}

/** Sort order: the later arrival first. */
function newestFirst(a: AuditRecord, b: AuditRecord): number {
  if (a.at !== b.at) return a.at < b.at ? 1 : -1
  return a.requestId < b.requestId ? 1 : a.requestId > b.requestId ? -1 : 0
}
