import type { FastifyBaseLogger } from 'fastify'
import type { AuditLog, AuditRecord } from '../audit/types.ts'
import { KASM_LIFECYCLE_SOURCES, type SessionRegistry, type SessionView } from '../sessions/types.ts'
import type { UrlPolicy } from '../upstream/url-policy.ts'
import type { KasmClient, KasmSession } from './client.ts'
import { kasmIdKey } from './ids.ts'
import { registerFromKasm } from './registration.ts'
import type { StaleSessions } from './stale.ts'
import { needsDetails, type UpstreamRules, upstreamFor } from './upstream.ts'

/** Who the audit log names for the sync's changes. */
export const SYNC_ACTOR = 'system:kasm-sync'

/** What one reconciliation did (metrics, logs, tests). */
export interface SyncOutcome {
  readonly removed: string[]
  readonly relocated: string[]
  readonly stale: number
}

/** Options of {@link KasmSync}. */
export interface KasmSyncOptions {
  readonly client: KasmClient
  readonly sessions: SessionRegistry
  /** The upstream URL policy every address from Kasm passes (GATEWAY_UPSTREAM_ALLOW). */
  readonly policy: UrlPolicy
  readonly stale: StaleSessions
  readonly audit: AuditLog
  readonly rules: UpstreamRules
  readonly log: FastifyBaseLogger
}

/**
 * One reconciliation of the registry with Kasm's sessions (`get_kasms`), run by the holder of the
 * `kasm-sync` job lease every GATEWAY_KASM_SYNC_S:
 *
 * - a session that follows Kasm's lifecycle (launched through the gateway, or registered with `lifecycle:
 *   "kasm"`) that Kasm no longer lists is removed, with an audit record saying why; the registry's change
 *   feed then ends its viewers on every replica and stops its reader, and presence follows the viewers;
 * - with an upstream rule that reads Kasm's details (`status`, `zone`), such a session Kasm reports at a new
 *   address is moved there (its reader reconnects);
 * - any other session Kasm does not list is flagged stale (admin API, metric), never removed.
 *
 * Only sessions registered before the list was asked for are judged, so a launch that finishes meanwhile is
 * never taken for a destroyed session; a removal happens only if the session is still at the version the
 * sync saw. An answer the client cannot read whole fails the run: nothing is concluded from it.
 */
export class KasmSync {
  readonly #o: KasmSyncOptions
  #runs = 0

  constructor(options: KasmSyncOptions) {
    this.#o = options
  }

  async run(signal?: AbortSignal): Promise<SyncOutcome> {
    const { sessions, client, rules, log } = this.#o
    const run = ++this.#runs
    const before = await sessions.list()
    const listed = new Map<string, KasmSession>()
    for (const kasm of await client.getKasms()) listed.set(kasmIdKey(kasm.kasmId), kasm)
    const previous = await this.#o.stale.all()
    const stale = new Map<string, string>()
    const removed: string[] = []
    const relocated: string[] = []
    for (const view of before) {
      if (signal?.aborted) throw new Error('the sync lost its lease')
      if (view.source === 'demo') continue
      const kasm = listed.get(kasmIdKey(view.kasmId))
      if (!KASM_LIFECYCLE_SOURCES.has(view.source)) {
        if (kasm === undefined) stale.set(view.kasmId, previous.get(view.kasmId) ?? new Date().toISOString())
        continue
      }
      if (kasm === undefined) {
        if (await sessions.remove(view.kasmId, { version: view.version })) {
          removed.push(view.kasmId)
          this.#audit(run, view)
          log.info({ kasmId: view.kasmId, team: view.team }, 'session removed: Kasm no longer has it')
        }
        continue
      }
      if (needsDetails(rules) && (await this.#relocate(view, kasm))) relocated.push(view.kasmId)
    }
    await this.#o.stale.replace(stale)
    return { removed, relocated, stale: stale.size }
  }

  /** Moves a session to the address Kasm reports now, when that differs; true when it moved. */
  async #relocate(view: SessionView, kasm: KasmSession): Promise<boolean> {
    const result = upstreamFor(this.#o.rules, view.kasmId, kasm)
    if (!result.ok || result.url === view.upstream) return false
    try {
      await registerFromKasm(this.#o.sessions, this.#o.policy, {
        kind: 'relocate',
        kasmId: view.kasmId,
        team: view.team,
        upstream: result.url,
        version: view.version,
      })
    } catch (err) {
      // Changed meanwhile (or refused): the next run looks again.
      this.#o.log.warn({ err, kasmId: view.kasmId }, 'session not moved to the address Kasm reports')
      return false
    }
    this.#o.log.info(
      { kasmId: view.kasmId, upstream: result.url },
      'session moved to the address Kasm reports',
    )
    return true
  }

  #audit(run: number, view: SessionView): void {
    const record: AuditRecord = {
      at: new Date().toISOString(),
      requestId: `kasm-sync-${run}`,
      sub: SYNC_ACTOR,
      kasmId: view.kasmId,
      // The team the session had: its admins read the audit by team, and the session is gone to look it up.
      team: view.team,
      method: 'DELETE',
      route: 'kasm/sync',
      action: 'remove',
      outcome: 'forwarded',
      status: 204,
      latencyMs: 0,
      reason: 'Kasm no longer has this session',
    }
    this.#o.audit.record(record)
    this.#o.log.info({ audit: record }, 'audit')
  }
}
