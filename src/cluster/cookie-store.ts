import type { ChainableCommander } from 'ioredis'
import type {
  CookieSessionRecord,
  CookieSessionStore,
  RevocationListener,
  StoredCookieSession,
} from '../auth/cookie-store.ts'
import type { ChangeFeed } from './change-feed.ts'
import { transaction } from './client.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'

/**
 * Each cookie session is a hash `{state, record, createdAt, expiresAt, lastSeenAt, refreshAt, idpIss, revokedAt}`
 * under the SHA-256 of its id (`idpIss`: the issuer it was signed in through, for back-channel logout); the
 * identity (`record`, JSON) is dropped when revoked. The key expires (PEXPIREAT, Redis's clock)
 * once the session can no longer be valid plus a retention, like the memory store. A per-subject set lists the
 * hashes for "sign out everywhere", a per-IdP-session set those for back-channel logout. Every revocation is
 * published (a session's by its script, a set's in one message), so each replica ends that session's open
 * streams at once and forgets the session it kept from a lookup of the last second (auth/recent-cookies.ts).
 */

/** KEYS: session. ARGV: lastSeenAt, idle ms, retain ms. */
const touch = `
if redis.call('HGET', KEYS[1], 'state') ~= 'active' then return 0 end
local seen = tonumber(ARGV[1])
local last = tonumber(redis.call('HGET', KEYS[1], 'lastSeenAt'))
if seen > last then redis.call('HSET', KEYS[1], 'lastSeenAt', ARGV[1]) else seen = last end
local ends = math.min(tonumber(redis.call('HGET', KEYS[1], 'expiresAt')), seen + tonumber(ARGV[2]))
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', ends + tonumber(ARGV[3])))
return 1
`

/** KEYS: session. ARGV: record JSON, refreshAt ('' for none). 1 when the active session was updated. */
const update = `
if redis.call('HGET', KEYS[1], 'state') ~= 'active' then return 0 end
redis.call('HSET', KEYS[1], 'record', ARGV[1])
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'refreshAt') else redis.call('HSET', KEYS[1], 'refreshAt', ARGV[2]) end
return 1
`

/** KEYS: session. ARGV: now, lease ms. 1 when a due refresh was claimed (refreshAt moved to now + lease). */
const claimRefresh = `
if redis.call('HGET', KEYS[1], 'state') ~= 'active' then return 0 end
local due = redis.call('HGET', KEYS[1], 'refreshAt')
if not due or tonumber(due) > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'refreshAt', string.format('%.0f', tonumber(ARGV[1]) + tonumber(ARGV[2])))
return 1
`

/**
 * KEYS: session. ARGV: now, session hash, revocation channel ('' to publish nothing), issuer ('' for any), the
 * creation time the session must be before (ms; '' for any). Revokes the session when active (and, with an
 * issuer, signed in through it before the time) and publishes its hash. 1 when revoked, 0 when left alone,
 * -1 when forgotten.
 * The channel is an argument, not a key: on a Redis Cluster a script's keys must share one slot, and PUBLISH
 * reaches every node's subscribers from any of them.
 */
const revoke = `
local state, iss, created = unpack(redis.call('HMGET', KEYS[1], 'state', 'idpIss', 'createdAt'))
if not state then return -1 end
if state ~= 'active' then return 0 end
if ARGV[4] ~= '' then
  local before = tonumber(ARGV[5])
  if iss ~= ARGV[4] or not (before == nil or tonumber(created) < before) then return 0 end
end
redis.call('HSET', KEYS[1], 'state', 'revoked', 'revokedAt', ARGV[1])
redis.call('HDEL', KEYS[1], 'record', 'createdAt', 'refreshAt')
if ARGV[4] ~= '' then redis.call('HDEL', KEYS[1], 'idpIss') end
if ARGV[3] ~= '' then redis.call('PUBLISH', ARGV[3], ARGV[2]) end
return 1
`

interface CookieCommands {
  krgCookieTouch(key: string, lastSeenAt: number, idleMs: number, retainMs: number): Promise<number>
  krgCookieUpdate(key: string, record: string, refreshAt: string): Promise<number>
  krgCookieClaimRefresh(key: string, now: number, leaseMs: number): Promise<number>
  krgCookieRevoke(
    key: string,
    now: number,
    idHash: string,
    channel: string,
    iss: string,
    before: string,
  ): Promise<number>
}

/** Options of {@link RedisCookieStore}. */
export interface RedisCookieStoreOptions {
  readonly command: RedisClient
  readonly keys: ClusterKeys
  /** GATEWAY_COOKIE_IDLE_S in ms. */
  readonly idleMs: number
  /** How long an ended session is kept so its refusal reason is known; default ten minutes. */
  readonly retainMs?: number
  /** Where revocations are heard (the cluster's subscriber); without one {@link onRevoked} hears nothing. */
  readonly feed?: ChangeFeed
}

/** The cluster's {@link CookieSessionStore}. Errors (Redis down) propagate: the caller answers 503. */
export class RedisCookieStore implements CookieSessionStore {
  readonly #redis: RedisClient & CookieCommands
  readonly #keys: ClusterKeys
  readonly #idleMs: number
  readonly #retainMs: number
  readonly #feed: ChangeFeed | undefined

  constructor(options: RedisCookieStoreOptions) {
    const r = options.command as RedisClient & Partial<CookieCommands>
    if (!r.krgCookieTouch) {
      options.command.defineCommand('krgCookieTouch', { numberOfKeys: 1, lua: touch })
      options.command.defineCommand('krgCookieUpdate', { numberOfKeys: 1, lua: update })
      options.command.defineCommand('krgCookieClaimRefresh', { numberOfKeys: 1, lua: claimRefresh })
      options.command.defineCommand('krgCookieRevoke', { numberOfKeys: 1, lua: revoke })
    }
    this.#redis = options.command as RedisClient & CookieCommands
    this.#keys = options.keys
    this.#idleMs = options.idleMs
    this.#retainMs = options.retainMs ?? 10 * 60_000
    this.#feed = options.feed
  }

  async create(idHash: string, record: CookieSessionRecord): Promise<void> {
    const key = this.#keys.cookie(idHash)
    const forgetAt = Math.min(record.expiresAt, record.lastSeenAt + this.#idleMs) + this.#retainMs
    const setsUntil = record.expiresAt + this.#retainMs
    const sets = [
      this.#keys.cookiesOf(record.sub),
      ...(record.idp?.sid === undefined ? [] : [this.#keys.cookiesOfIdpSession(record.idp.sid)]),
    ]
    // The sets first: on a Redis Cluster these are separate transactions (other slots), and a session must
    // never exist without the entries a logout everywhere or a back-channel logout finds it by.
    await transaction(this.#redis, [
      // Each set lives as long as the longest session in it could.
      ...sets.map(
        (set) => (tx: ChainableCommander) =>
          tx.sadd(set, idHash).pexpireat(set, setsUntil, 'GT').pexpireat(set, setsUntil, 'NX'),
      ),
      (tx) =>
        tx
          .hset(key, {
            state: 'active',
            record: JSON.stringify(record),
            createdAt: String(record.createdAt),
            expiresAt: String(record.expiresAt),
            lastSeenAt: String(record.lastSeenAt),
            ...(record.idp?.refreshAt === undefined ? {} : { refreshAt: String(record.idp.refreshAt) }),
            ...(record.idp === undefined ? {} : { idpIss: record.idp.iss }),
          })
          .pexpireat(key, forgetAt),
    ])
  }

  async get(idHash: string): Promise<StoredCookieSession | null> {
    const h = await this.#redis.hgetall(this.#keys.cookie(idHash))
    if (h.state === 'revoked') return { state: 'revoked', revokedAt: Number(h.revokedAt) }
    if (h.state !== 'active' || h.record === undefined) return null
    const record = JSON.parse(h.record) as CookieSessionRecord
    // The times are hash fields of their own (the record JSON is replaced on update): those are the truth.
    if (h.createdAt !== undefined) record.createdAt = Number(h.createdAt)
    record.expiresAt = Number(h.expiresAt)
    record.lastSeenAt = Math.max(record.lastSeenAt, Number(h.lastSeenAt))
    // The hash field is the truth: a claimed refresh moves it without rewriting the record.
    if (record.idp !== undefined) {
      if (h.refreshAt === undefined) delete record.idp.refreshAt
      else record.idp.refreshAt = Number(h.refreshAt)
    }
    return { state: 'active', record }
  }

  async touch(idHash: string, lastSeenAt: number): Promise<void> {
    await this.#redis.krgCookieTouch(this.#keys.cookie(idHash), lastSeenAt, this.#idleMs, this.#retainMs)
  }

  async update(idHash: string, record: CookieSessionRecord): Promise<boolean> {
    const refreshAt = record.idp?.refreshAt === undefined ? '' : String(record.idp.refreshAt)
    const ok = await this.#redis.krgCookieUpdate(this.#keys.cookie(idHash), JSON.stringify(record), refreshAt)
    return ok === 1
  }

  async claimRefresh(idHash: string, now: number, leaseMs: number): Promise<boolean> {
    return (await this.#redis.krgCookieClaimRefresh(this.#keys.cookie(idHash), now, leaseMs)) === 1
  }

  async revoke(idHash: string): Promise<boolean> {
    const channel = this.#keys.cookiesRevokedChannel
    return (await this.#revokeOne(idHash, Date.now(), channel, '', '')) === 1
  }

  revokeAllOf(sub: string): Promise<number> {
    return this.#revokeEach(this.#keys.cookiesOf(sub), '', '')
  }

  revokeIdpSession(iss: string, sid: string): Promise<number> {
    return this.#revokeEach(this.#keys.cookiesOfIdpSession(sid), iss, '')
  }

  revokeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number> {
    return this.#revokeEach(this.#keys.cookiesOf(sub), iss, String(Math.floor(signedInBefore)))
  }

  async onRevoked(listener: RevocationListener): Promise<() => void> {
    if (this.#feed === undefined) return () => {}
    return this.#feed.listen(this.#keys.cookiesRevokedChannel, {
      message: (payload) => listener.revoked(payload.split(',')),
      resync: () => listener.resync(),
    })
  }

  /** The connections belong to the cluster plugin. */
  async close(): Promise<void> {}

  #revokeOne(idHash: string, now: number, channel: string, iss: string, before: string): Promise<number> {
    return this.#redis.krgCookieRevoke(this.#keys.cookie(idHash), now, idHash, channel, iss, before)
  }

  /**
   * A set's revocation, the same with one Redis as on a Redis Cluster, where the sessions live in other slots
   * than the set (and a script may only touch the keys it names, of one slot): read the set, revoke each session with its own script (atomic per
   * session), announce the revoked ones in one message, then remove from the set the
   * sessions handled: the revoked ones, and when revoking all (`iss` '') those already revoked too. SREM of
   * those members, never DEL: a session created meanwhile was added after the read and stays listed for the
   * next logout. An entry whose session is missing stays: it may be one being created (its set entry is
   * written first), which a removal here would leave unlisted once written; forgotten ones go when the set
   * expires. A session is revoked before it leaves its set, so a stop in between leaves it listed and a retry
   * finds it again; a lost announcement is made up for by the replicas' one-second lookups.
   */
  async #revokeEach(setKey: string, iss: string, before: string): Promise<number> {
    const hashes = await this.#redis.smembers(setKey)
    if (hashes.length === 0) return 0
    const now = Date.now()
    const results = await Promise.all(hashes.map((hash) => this.#revokeOne(hash, now, '', iss, before)))
    const revoked = hashes.filter((_, i) => results[i] === 1)
    if (revoked.length > 0) await this.#redis.publish(this.#keys.cookiesRevokedChannel, revoked.join(','))
    const handled = hashes.filter((_, i) => results[i] === 1 || (iss === '' && results[i] === 0))
    if (handled.length > 0) await this.#redis.srem(setKey, ...handled)
    return revoked.length
  }
}
