import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit'
import type { Redis } from 'ioredis'

/**
 * KEYS: counter. ARGV: how many requests to add, window ms. Returns the count after them and the ms left in
 * the window (the window starts with its first request, as @fastify/rate-limit's own Redis store does).
 */
const add = `
local current = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {current, ttl}
`

interface AddCommand {
  krgRateLimitAdd(key: string, count: number, windowMs: number): Promise<[number, number]>
}

type Callback = (error: Error | null, result?: { current: number; ttl: number }) => void

/** Requests of one key waiting for the round trip in flight to end. */
interface Waiting {
  callbacks: Callback[]
  windowMs: number
}

/**
 * @fastify/rate-limit's counters in Redis, shared by every replica, at one round trip per key at a time: while
 * a key's increment is in flight, the requests of that key that arrive wait and are added together in the
 * next one (INCRBY n), each answered with its own place in the count. The count stays exact (the limit is
 * never exceeded, the same requests are refused as one at a time); a busy operator's burst costs a round trip
 * per Redis latency instead of one per request. A request with nothing in flight is sent at once.
 */
class CoalescingStore implements FastifyRateLimitStore {
  private readonly redis: Redis & AddCommand
  private readonly prefix: string
  private readonly windowMs: number
  readonly #waiting = new Map<string, Waiting>()
  readonly #inFlight = new Set<string>()

  constructor(redis: Redis & AddCommand, prefix: string, windowMs: number) {
    this.redis = redis
    this.prefix = prefix
    this.windowMs = windowMs
  }

  incr(key: string, callback: Callback, timeWindow?: number): void {
    const k = this.prefix + key
    const waiting = this.#waiting.get(k)
    if (waiting === undefined)
      this.#waiting.set(k, { callbacks: [callback], windowMs: timeWindow ?? this.windowMs })
    else waiting.callbacks.push(callback)
    if (!this.#inFlight.has(k)) this.#send(k)
  }

  child(routeOptions: Parameters<FastifyRateLimitStore['child']>[0]): FastifyRateLimitStore {
    // The same key space as @fastify/rate-limit's Redis store gives a route with a budget of its own; the
    // plugin passes the route as `routeInfo` (store/RedisStore.js), which its typings do not say.
    const { method, url } = (routeOptions as unknown as { routeInfo: { method: string; url: string } })
      .routeInfo
    return new CoalescingStore(this.redis, `${this.prefix}${method}${url}-`, this.windowMs)
  }

  #send(k: string): void {
    const waiting = this.#waiting.get(k)
    if (waiting === undefined) return
    this.#waiting.delete(k)
    this.#inFlight.add(k)
    const { callbacks, windowMs } = waiting
    this.redis
      .krgRateLimitAdd(k, callbacks.length, windowMs)
      .then(
        ([current, ttl]) => {
          const first = current - callbacks.length + 1
          for (const [i, cb] of callbacks.entries()) cb(null, { current: first + i, ttl })
        },
        (err: Error) => {
          for (const cb of callbacks) cb(err)
        },
      )
      .finally(() => {
        this.#inFlight.delete(k)
        this.#send(k)
      })
  }
}

/** The store class for @fastify/rate-limit's `store` option: counters under `nameSpace` on `redis`. */
export function coalescingRateLimitStore(redis: Redis, nameSpace: string): FastifyRateLimitStoreCtor {
  const r = redis as Redis & Partial<AddCommand>
  if (!r.krgRateLimitAdd) redis.defineCommand('krgRateLimitAdd', { numberOfKeys: 1, lua: add })
  return class extends CoalescingStore {
    constructor(options: { timeWindow?: number | string }) {
      super(
        redis as Redis & AddCommand,
        nameSpace,
        typeof options.timeWindow === 'number' ? options.timeWindow : 60_000,
      )
    }
  } as unknown as FastifyRateLimitStoreCtor
}
