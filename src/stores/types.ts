import type { AuditStreams } from '../audit/streams.ts'
import type { FailureCounter } from '../auth/address-failures.ts'
import type { CookieSessionStore } from '../auth/cookie-store.ts'
import type { LoginAttemptStore } from '../auth/oidc/login-attempts.ts'
import type { UsedLogoutTokens } from '../auth/oidc/used-logout-tokens.ts'
import type { RateLimitStore } from '../auth/rate-limit-store.ts'
import type { Sealer } from '../auth/sealer.ts'
import type { ChatMessageStore } from '../chat/messages.ts'
import type { TeamsInstallationStore } from '../chat/msteams/installations.ts'
import type { SeenKeys } from '../chat/seen-keys.ts'
import type { LeasedJob, LeasedJobOptions } from '../cluster/job-lease.ts'
import type { EventBus, ReaderLease } from '../events/bus.ts'
import type { Presence } from '../events/presence.ts'
import type { StreamSlots } from '../events/stream-slots.ts'
import type { ChatLinkStore } from '../identity/chat-link-store.ts'
import type { StaleSessions } from '../kasm/stale.ts'
import type { DeliveryLedger } from '../notify/ledger.ts'
import type { ReportStore } from '../report/types.ts'
import type { SessionStore } from '../sessions/store.ts'
import type { SessionBoard } from '../summary/board.ts'

/** What a feature says about its cluster-wide job; the lease, its length and the outage signal are the stores'. */
export type JobOptions = Omit<LeasedJobOptions, 'lease' | 'leaseMs' | 'quiet'>

/**
 * Every store of the gateway, chosen once (`stores/plugin.ts`): the memory implementations of one process,
 * or the Redis ones of the cluster. Features take their store from here and never ask which it is, except
 * where the difference is a cost they must plan for ({@link Stores.shared}).
 */
export interface Stores {
  /** True when the stores are shared with other replicas (Redis): every lookup is a round trip. */
  readonly shared: boolean
  /** This process among the replicas (the cluster's id; host and pid embedded): user agents, logs. */
  readonly replicaId: string
  /**
   * True while the stores are known to be away (a Redis outage; never embedded): what fails because of it
   * logs at debug, and what cannot work without them is refused before it starts.
   */
  readonly down: () => boolean
  /** The session registry's store, started (Redis: its mirror loaded and its records re-sealed by a job). */
  readonly sessions: SessionStore
  readonly cookies: CookieSessionStore
  /** Sign-ins waiting for their callback, which any replica may receive. */
  readonly loginAttempts: LoginAttemptStore
  /** Back-channel logout tokens already acted on (their `jti`), until they expire. */
  readonly usedLogoutTokens: UsedLogoutTokens
  /** What seals the secrets a store keeps (IdP tokens, login attempts): the vault in Redis, nothing in memory. */
  readonly sealer: Sealer
  /** Failed sign-ins per client address. */
  readonly signInFailures: FailureCounter
  /** Requests to the Slack Request URL whose signature failed, per client address. */
  readonly slackSignatureFailures: FailureCounter
  /** Activities to the Teams messaging endpoint whose bearer token (or its match) failed, per client address. */
  readonly msteamsBearerFailures: FailureCounter
  /**
   * The audit log: the trail of authenticated actions and, bounded apart, the records of refused, aborted and
   * anonymous requests (two ring buffers, or two capped Redis streams).
   */
  readonly audit: AuditStreams
  /** Session boards: reader health and question claims. */
  readonly board: SessionBoard
  readonly bus: EventBus
  readonly readerLease: ReaderLease
  /** The per-operator stream cap: this replica's count, or every replica's. */
  readonly streamSlots: StreamSlots
  readonly presence: Presence
  /** The rate limit's counters: this process's, or leased from Redis (shared by every replica). */
  readonly rateLimit: RateLimitStore
  /** Sessions the Kasm sync flagged stale (only the Kasm plugin asks, when it is configured). */
  staleSessions(): StaleSessions
  /** The team report's records and claims (GATEWAY_REPORT_RETENTION_DAYS). */
  readonly report: ReportStore
  /** Webhook deliveries claimed before sending (only the notify plugin asks, when it is configured). */
  deliveryLedger(): DeliveryLedger
  /** Chat accounts linked to people (only asked for when a chat adapter is configured). */
  chatLinks(): ChatLinkStore
  /** Messages the chat adapter posted, found again by any replica (only the chat adapter asks). */
  chatMessages(): ChatMessageStore
  /** Keys seen once within a window, across replicas (the chat adapter's replay refusal, link tokens). */
  seenKeys(): SeenKeys
  /** Where the Teams bot is installed (only the Teams bot asks). */
  teamsInstallations(): TeamsInstallationStore
  /**
   * A job one replica runs at a time, on the job lease (embedded, the memory lease always grants): the
   * caller starts and stops it.
   */
  leasedJob(options: JobOptions): LeasedJob
}
