import type { LoginAttemptStore } from '../auth/oidc/login-attempts.ts'
import type { RedisClient } from './connections.ts'

/** The cluster's {@link LoginAttemptStore}: the callback may reach any replica. GETDEL makes each one-time. */
export class RedisLoginAttemptStore implements LoginAttemptStore {
  private readonly redis: RedisClient
  private readonly keyOf: (key: string) => string

  constructor(redis: RedisClient, keyOf: (key: string) => string) {
    this.redis = redis
    this.keyOf = keyOf
  }

  async put(key: string, value: string, ttlMs: number): Promise<void> {
    await this.redis.set(this.keyOf(key), value, 'PX', ttlMs)
  }

  take(key: string): Promise<string | null> {
    return this.redis.getdel(this.keyOf(key))
  }

  peek(key: string): Promise<string | null> {
    return this.redis.get(this.keyOf(key))
  }

  /** The connection belongs to the cluster plugin. */
  async close(): Promise<void> {}
}
