import type { StaleSessions } from '../kasm/stale.ts'
import type { RedisClient } from './connections.ts'

/** The cluster's {@link StaleSessions}: one hash, replaced in one transaction by the sync's holder. */
export class RedisStaleSessions implements StaleSessions {
  readonly #command: RedisClient
  readonly #key: string

  constructor(command: RedisClient, key: string) {
    this.#command = command
    this.#key = key
  }

  async all(): Promise<Map<string, string>> {
    return new Map(Object.entries(await this.#command.hgetall(this.#key)))
  }

  async replace(stale: ReadonlyMap<string, string>): Promise<void> {
    const tx = this.#command.multi().del(this.#key)
    if (stale.size > 0) tx.hset(this.#key, Object.fromEntries(stale))
    const results = await tx.exec()
    const err = results?.find(([e]) => e)?.[0]
    if (err) throw err
  }
}
