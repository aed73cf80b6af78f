import type { FailureCounter } from '../auth/address-failures.ts'
import type { RedisClient } from './connections.ts'

/** KEYS: counter. ARGV: window ms. Returns {count, ms until the window ends}. */
const add = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}
`

interface FailureCommands {
  krgFailureAdd(key: string, windowMs: number): Promise<[number, number]>
}

/** The cluster's {@link FailureCounter}: one expiring counter per key, shared by every replica. */
export class RedisFailureCounter implements FailureCounter {
  readonly #redis: RedisClient & FailureCommands
  readonly #key: (key: string) => string

  constructor(command: RedisClient, keyOf: (key: string) => string) {
    const r = command as RedisClient & Partial<FailureCommands>
    if (!r.krgFailureAdd) command.defineCommand('krgFailureAdd', { numberOfKeys: 1, lua: add })
    this.#redis = command as RedisClient & FailureCommands
    this.#key = keyOf
  }

  async add(key: string, windowMs: number): Promise<{ count: number; resetInMs: number }> {
    const [count, pttl] = await this.#redis.krgFailureAdd(this.#key(key), windowMs)
    return { count, resetInMs: pttl > 0 ? pttl : windowMs }
  }
}
