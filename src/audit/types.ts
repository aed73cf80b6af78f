/**
 * Who did what, to which session: one record per write (and per refused write) under `/desktop/` and
 * `/admin/`. Never the message text, never a token.
 */
export interface AuditRecord {
  /** When the request arrived (ISO 8601). */
  at: string
  /** The request's id: its X-Request-ID, in every log line of the request and in its error body. */
  requestId: string
  /**
   * The client's address as GATEWAY_TRUST_PROXY makes it (the X-Forwarded-For entry of the nearest untrusted
   * hop behind trusted proxies, else the peer). Absent from changes no request made (the Kasm sync's).
   */
  clientIp?: string
  /** The operator's `sub`; null when the request was refused before authentication. */
  sub: string | null
  /** The operator's display name, when the credential carries one (the console says who answered). */
  name?: string
  /** The session, when the URL or the route named a valid one. */
  kasmId: string | null
  /**
   * The team of that session when the record was made (what an admin limited to teams may read); null when
   * no registered session was named, or when the caller was not authenticated or not of that team (anyone
   * could otherwise write into a team's view). Records from before 0.2 have none and are shown to admins of
   * every team (`*`) only.
   */
  team?: string | null
  method: string
  /**
   * The name the route gives in its config: the v1 route name (`messages`, `actions`, `attachments`,
   * `requests/cancel`, …), the admin or the `auth/…` route; `unknown` or `admin/unknown` for a write no route
   * serves.
   */
  route: string
  /** The client's idempotency key, when the route has one. */
  key?: string
  /** The run a message or action was addressed to (its `run` field). */
  run?: string
  /** The request a reply answered (its `reply_to`); never the values. */
  replyTo?: string
  /** The question a claim ("I'm on it", route `claim`) took or gave back: its request id. */
  question?: string
  /**
   * The control action (`stop`, `finish_handoff`), the admin change (`create`, `replace`, `delete`) or the
   * claim's (`claim`, `release`).
   */
  action?: string
  /** Through what a reply, a `finish_handoff` or a claim was sent (`console`, `sidebar`, `api`, `slack`; see via.ts). */
  via?: Via
  /**
   * `forwarded`: the runtime (or, for admin routes, the gateway) handled it; `refused`: the gateway refused;
   * `aborted`: the client went away before an answer (an upload cut short), recorded with status 499.
   */
  outcome: 'forwarded' | 'refused' | 'aborted'
  /** The status the client got (499 when it went away first). */
  status: number
  /** The runtime's status, when the request reached it. */
  upstreamStatus?: number
  latencyMs: number
  /** The gateway's error code when it refused (`unauthenticated`, `forbidden`, `rate_limited`, …). */
  error?: string
  /**
   * Why: the gateway's own change no request asked for (the Kasm sync's removals), or what made it refuse a
   * sign-in (the check an ID token failed, what the identity provider answered). Fixed wording, never input.
   */
  reason?: string
}

/** Detail a route adds for the audit record of its request (see `request.auditDetail`). */
export interface AuditDetail {
  /** Set once the request's record is written, so an abort and a late response do not write two. */
  recorded?: boolean
  kasmId?: string
  /** Who, when no credential says so (a sign-in refused after the IdP named the person, a logout token's `sub`). */
  sub?: string
  /**
   * The route authenticated the request by a credential of its own (a back-channel logout's token): its
   * record belongs to the trail of authenticated actions though no operator signed in.
   */
  authenticated?: true
  route?: string
  key?: string
  run?: string
  replyTo?: string
  question?: string
  action?: string
  /** The channel of a reply or handoff end; a caller that knows better sets it first (the Slack adapter: `slack`). */
  via?: Via
  upstreamStatus?: number
  error?: string
  /** Why the request was refused, in fixed wording (see {@link AuditRecord.reason}). */
  reason?: string
  /**
   * The session's team, when the route knows it (e.g. a session it removes); else looked up when recording.
   * Either way the record takes it only when the caller belongs to that team.
   */
  team?: string
}

/** A query of recent records; filters match exactly. */
export interface AuditQuery {
  limit: number
  kasmId?: string
  sub?: string
  /** Replies to this request (with {@link AuditQuery.run}: of that run). */
  replyTo?: string
  run?: string
  /** Only records of sessions of these teams (an admin's teams); all records when absent. */
  teams?: ReadonlySet<string>
}

/** Whether `record` passes the filters of `query` (each filter matches exactly; an absent one matches all). */
export function matches(record: AuditRecord, query: AuditQuery): boolean {
  if (query.kasmId !== undefined && record.kasmId !== query.kasmId) return false
  if (query.sub !== undefined && record.sub !== query.sub) return false
  if (query.replyTo !== undefined && record.replyTo !== query.replyTo) return false
  if (query.run !== undefined && record.run !== query.run) return false
  if (query.teams !== undefined && (typeof record.team !== 'string' || !query.teams.has(record.team)))
    return false
  return true
}

/** Where audit records go: a ring buffer in memory, a capped Redis stream in a cluster (each of two, see streams.ts). */
export interface AuditLog {
  /** Stores a record; never throws and never waits (a failing store logs, the request is not held up). */
  record(record: AuditRecord): void
  /** The newest records first, at most `limit`, matching the filters. */
  recent(query: AuditQuery): Promise<AuditRecord[]>
}

/**
 * Through what a person answered a question or ended a handoff, as the audit records it: `console` (the
 * gateway's console page, which sends `X-Krg-Client: console`), `sidebar` (a cookie request without it: the
 * runtime's bundled sidebar, or any other page signed in with the cookie), `api` (a bearer token), `slack` or
 * `msteams` (set by the chat adapter through `request.auditDetail.via`, which always wins).
 */
export type Via = 'console' | 'sidebar' | 'api' | 'slack' | 'msteams'

/** Every {@link Via}, for metrics that export each at 0. */
export const VIAS: readonly Via[] = ['console', 'sidebar', 'api', 'slack', 'msteams']
