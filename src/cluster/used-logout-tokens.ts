import type { UsedLogoutTokens } from '../auth/oidc/used-logout-tokens.ts'
import type { RedisClient } from './connections.ts'

/**
 * The cluster's {@link UsedLogoutTokens}: one key per token, `SET NX` with its expiry (`PXAT`), so a token is
 * acted on once across every replica and the key leaves Redis when the token could no longer be accepted.
 * Errors (Redis down) propagate: the route answers 503 and the IdP may send the token again.
 */
export class RedisUsedLogoutTokens implements UsedLogoutTokens {
  readonly #redis: RedisClient
  readonly #key: (hash: string) => string

  constructor(command: RedisClient, keyOf: (hash: string) => string) {
    this.#redis = command
    this.#key = keyOf
  }

  async claim(key: string, untilMs: number): Promise<boolean> {
    return (await this.#redis.set(this.#key(key), '1', 'PXAT', Math.ceil(untilMs), 'NX')) === 'OK'
  }

  async release(key: string): Promise<void> {
    await this.#redis.del(this.#key(key))
  }
}
