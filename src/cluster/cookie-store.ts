import type { Redis } from 'ioredis'
import type { CookieSessionRecord, CookieSessionStore, StoredCookieSession } from '../auth/cookie-store.ts'
import type { ClusterKeys } from './keys.ts'

/**
 * Each cookie session is a hash `{state, record, expiresAt, lastSeenAt, revokedAt}` under the SHA-256 of its
 * id; the identity (`record`, JSON) is dropped when revoked. The key expires (PEXPIREAT, Redis's clock) once
 * the session can no longer be valid plus a retention, like the memory store. A per-subject set lists the
 * hashes for "sign out everywhere". Every lookup reads Redis, so a revocation on one replica is refused by
 * every replica from the next request on.
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

/** KEYS: session. ARGV: now. 1 when an active session was revoked. */
const revoke = `
if redis.call('HGET', KEYS[1], 'state') ~= 'active' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'revoked', 'revokedAt', ARGV[1])
redis.call('HDEL', KEYS[1], 'record')
return 1
`

/** KEYS: subject set. ARGV: now, key prefix of sessions. Revokes every active one; returns how many. */
const revokeAll = `
local n = 0
for _, hash in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[2] .. hash
  local state = redis.call('HGET', key, 'state')
  if state == 'active' then
    redis.call('HSET', key, 'state', 'revoked', 'revokedAt', ARGV[1])
    redis.call('HDEL', key, 'record')
    n = n + 1
  end
  redis.call('SREM', KEYS[1], hash)
end
return n
`

interface CookieCommands {
  krgCookieTouch(key: string, lastSeenAt: number, idleMs: number, retainMs: number): Promise<number>
  krgCookieRevoke(key: string, now: number): Promise<number>
  krgCookieRevokeAll(setKey: string, now: number, prefix: string): Promise<number>
}

/** Options of {@link RedisCookieStore}. */
export interface RedisCookieStoreOptions {
  readonly command: Redis
  readonly keys: ClusterKeys
  /** GATEWAY_COOKIE_IDLE_S in ms. */
  readonly idleMs: number
  /** How long an ended session is kept so its refusal reason is known; default ten minutes. */
  readonly retainMs?: number
}

/** The cluster's {@link CookieSessionStore}. Errors (Redis down) propagate: the caller answers 503. */
export class RedisCookieStore implements CookieSessionStore {
  readonly #redis: Redis & CookieCommands
  readonly #keys: ClusterKeys
  readonly #idleMs: number
  readonly #retainMs: number

  constructor(options: RedisCookieStoreOptions) {
    const r = options.command as Redis & Partial<CookieCommands>
    if (!r.krgCookieTouch) {
      options.command.defineCommand('krgCookieTouch', { numberOfKeys: 1, lua: touch })
      options.command.defineCommand('krgCookieRevoke', { numberOfKeys: 1, lua: revoke })
      options.command.defineCommand('krgCookieRevokeAll', { numberOfKeys: 1, lua: revokeAll })
    }
    this.#redis = options.command as Redis & CookieCommands
    this.#keys = options.keys
    this.#idleMs = options.idleMs
    this.#retainMs = options.retainMs ?? 10 * 60_000
  }

  async create(idHash: string, record: CookieSessionRecord): Promise<void> {
    const key = this.#keys.cookie(idHash)
    const forgetAt = Math.min(record.expiresAt, record.lastSeenAt + this.#idleMs) + this.#retainMs
    const ofSub = this.#keys.cookiesOf(record.sub)
    await this.#redis
      .multi()
      .hset(key, {
        state: 'active',
        record: JSON.stringify(record),
        expiresAt: String(record.expiresAt),
        lastSeenAt: String(record.lastSeenAt),
      })
      .pexpireat(key, forgetAt)
      .sadd(ofSub, idHash)
      // The set lives as long as the longest session in it could.
      .pexpireat(ofSub, record.expiresAt + this.#retainMs, 'GT')
      .pexpireat(ofSub, record.expiresAt + this.#retainMs, 'NX')
      .exec()
      .then(failed)
  }

  async get(idHash: string): Promise<StoredCookieSession | null> {
    const h = await this.#redis.hgetall(this.#keys.cookie(idHash))
    if (h.state === 'revoked') return { state: 'revoked', revokedAt: Number(h.revokedAt) }
    if (h.state !== 'active' || h.record === undefined) return null
    const record = JSON.parse(h.record) as CookieSessionRecord
    record.lastSeenAt = Math.max(record.lastSeenAt, Number(h.lastSeenAt))
    return { state: 'active', record }
  }

  async touch(idHash: string, lastSeenAt: number): Promise<void> {
    await this.#redis.krgCookieTouch(this.#keys.cookie(idHash), lastSeenAt, this.#idleMs, this.#retainMs)
  }

  async revoke(idHash: string): Promise<boolean> {
    return (await this.#redis.krgCookieRevoke(this.#keys.cookie(idHash), Date.now())) === 1
  }

  async revokeAllOf(sub: string): Promise<number> {
    return this.#redis.krgCookieRevokeAll(this.#keys.cookiesOf(sub), Date.now(), this.#keys.cookie(''))
  }

  /** The connection belongs to the cluster plugin. */
  async close(): Promise<void> {}
}

/** MULTI reports a failed command in its results instead of rejecting: make it reject. */
function failed(results: [Error | null, unknown][] | null): void {
  const err = results?.find(([e]) => e)?.[0]
  if (err) throw err
}
