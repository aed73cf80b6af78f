import type { RateLimitCallback, RateLimitStore } from '../auth/rate-limit-store.ts'
import type { RedisClient } from './connections.ts'

/**
 * KEYS: counter. ARGV: units wanted, the window's budget, window ms. Hands out up to the units wanted of what
 * is left of the budget (never beyond it) and returns the count after them, the units granted and the ms left
 * in the window (the window starts with its first lease, as a window in memory starts with its first request).
 */
const lease = `
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - used)
if grant > 0 then used = redis.call('INCRBY', KEYS[1], grant) else grant = 0 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  ttl = tonumber(ARGV[3])
end
return {used, grant, ttl}
`

interface LeaseCommand {
  krgRateLimitLease(
    key: string,
    want: number,
    max: number,
    windowMs: number,
  ): Promise<[number, number, number]>
}

/**
 * A replica holds at most this share of a window's budget unused: with R replicas an operator may be refused
 * up to R × max / LEASE_SHARE requests early in a window, and is never admitted beyond the budget.
 */
const LEASE_SHARE = 50
/** Past this many keys, windows that ended are forgotten (at most once a second). */
const SWEEP_AT = 1024

/** One key's part of the current window on this replica. */
interface Quota {
  /** When the window ends (Date.now() scale), from the counter's TTL at the last lease. */
  windowEnd: number
  /** The place in the window's count of the next unit this replica holds. */
  place: number
  /** Units leased and not used yet. */
  left: number
  /** The size of the next lease: doubles with each lease of the window, up to the cap. */
  next: number
  /** Redis granted less than was asked: the window's budget is spent, refused here until it ends. */
  spent: boolean
  /** Requests waiting for the lease in flight. */
  waiting: RateLimitCallback[]
  inFlight: boolean
}

/**
 * The rate limit's counters in Redis, shared by every replica, without a round trip per request: each
 * replica leases units of an operator's window budget (1, then 2, 4, … up to max / {@link LEASE_SHARE}) and
 * answers from them in process; the requests that arrive while a lease is in flight wait for it and are
 * served from it (a burst asks for as many units as it holds). The budget is never exceeded: Redis counts
 * the units handed out. What a replica holds unused when the window ends lapses, so a busy operator spread
 * over replicas may be refused a little early. Once Redis has granted less than asked the window is spent,
 * and requests are refused here until it ends, without asking again.
 */
class LeasingStore implements RateLimitStore {
  readonly #quotas = new Map<string, Quota>()
  readonly #redis: RedisClient & LeaseCommand
  readonly #prefix: string
  #sweptAt = 0

  constructor(redis: RedisClient & LeaseCommand, prefix: string) {
    this.#redis = redis
    this.#prefix = prefix
  }

  incr(key: string, windowMs: number, max: number, callback: RateLimitCallback): void {
    const k = this.#prefix + key
    const now = Date.now()
    let quota = this.#quotas.get(k)
    if (quota !== undefined && now >= quota.windowEnd && !quota.inFlight) {
      this.#quotas.delete(k)
      quota = undefined
    }
    if (quota === undefined) {
      if (this.#quotas.size >= SWEEP_AT) this.#sweep(now)
      quota = { windowEnd: 0, place: 0, left: 0, next: 1, spent: false, waiting: [], inFlight: false }
      this.#quotas.set(k, quota)
    }
    if (!quota.inFlight && this.#answer(quota, callback, max, now)) return
    quota.waiting.push(callback)
    if (!quota.inFlight) this.#lease(k, quota, windowMs, max)
  }

  /** Answers from what this replica holds; false when a lease is needed first. */
  #answer(quota: Quota, callback: RateLimitCallback, max: number, now: number): boolean {
    if (now >= quota.windowEnd) return false
    const ttl = quota.windowEnd - now
    if (quota.left > 0) {
      quota.left--
      callback(null, { current: quota.place++, ttl })
      return true
    }
    if (quota.spent) {
      callback(null, { current: max + 1, ttl })
      return true
    }
    return false
  }

  #lease(k: string, quota: Quota, windowMs: number, max: number): void {
    const waiting = quota.waiting
    quota.waiting = []
    quota.inFlight = true
    const cap = Number.isFinite(max) ? Math.max(1, Math.ceil(max / LEASE_SHARE)) : 1
    const want = Math.max(waiting.length, Math.min(quota.next, cap))
    this.#redis.krgRateLimitLease(k, want, Number.isFinite(max) ? max : 2 ** 53, windowMs).then(
      ([used, granted, ttl]) => {
        const now = Date.now()
        quota.inFlight = false
        quota.windowEnd = now + ttl
        quota.place = used - granted + 1
        quota.left = granted
        quota.next = Math.min(cap, quota.next * 2)
        quota.spent = granted < want
        for (const cb of waiting) if (!this.#answer(quota, cb, max, now)) quota.waiting.push(cb)
        // Those that came meanwhile.
        const later = quota.waiting
        quota.waiting = []
        for (const cb of later) if (!this.#answer(quota, cb, max, now)) quota.waiting.push(cb)
        // Requests the lease could not cover, the budget not spent: the next, larger lease serves them.
        if (quota.waiting.length > 0) this.#lease(k, quota, windowMs, max)
      },
      (err: Error) => {
        // Forgotten, so the next request asks again; those waiting now pass (skipOnError).
        this.#quotas.delete(k)
        for (const cb of waiting) cb(err)
        for (const cb of quota.waiting) cb(err)
      },
    )
  }

  #sweep(now: number): void {
    if (now - this.#sweptAt < 1000) return
    this.#sweptAt = now
    for (const [k, q] of this.#quotas) if (now >= q.windowEnd && !q.inFlight) this.#quotas.delete(k)
  }
}

/** The rate limit's counters under `nameSpace` on `redis`, leased (see {@link LeasingStore}). */
export function leasingRateLimitStore(redis: RedisClient, nameSpace: string): RateLimitStore {
  const r = redis as RedisClient & Partial<LeaseCommand>
  if (!r.krgRateLimitLease) redis.defineCommand('krgRateLimitLease', { numberOfKeys: 1, lua: lease })
  return new LeasingStore(redis as RedisClient & LeaseCommand, nameSpace)
}
