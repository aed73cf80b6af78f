import { createHash } from 'node:crypto'
import {
  CHAT_MESSAGE_TTL_MS,
  type ChatMessage,
  type ChatMessageKey,
  type ChatMessageStore,
  chatMessageKey,
} from '../chat/messages.ts'
import type { SeenKeys } from '../chat/seen-keys.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'

const hash = (key: string): string => createHash('sha256').update(key).digest('base64url').slice(0, 32)

/** The cluster's {@link ChatMessageStore}: one JSON string per message, expiring. */
export class RedisChatMessageStore implements ChatMessageStore {
  readonly #redis: RedisClient
  readonly #keys: ClusterKeys

  constructor(command: RedisClient, keys: ClusterKeys) {
    this.#redis = command
    this.#keys = keys
  }

  async put(key: ChatMessageKey, message: ChatMessage): Promise<void> {
    const k = this.#keys.chatMessage(key.kasmId, hash(chatMessageKey(key)))
    await this.#redis.set(k, JSON.stringify(message), 'PX', CHAT_MESSAGE_TTL_MS)
  }

  async get(key: ChatMessageKey): Promise<ChatMessage | null> {
    const raw = await this.#redis.get(this.#keys.chatMessage(key.kasmId, hash(chatMessageKey(key))))
    return raw === null ? null : (JSON.parse(raw) as ChatMessage)
  }
}

/** The cluster's {@link SeenKeys}: `SET NX PX`, so exactly one replica sees a key first. */
export class RedisSeenKeys implements SeenKeys {
  readonly #redis: RedisClient
  readonly #keys: ClusterKeys

  constructor(command: RedisClient, keys: ClusterKeys) {
    this.#redis = command
    this.#keys = keys
  }

  async first(key: string, ttlMs: number): Promise<boolean> {
    return (await this.#redis.set(this.#keys.seen(hash(key)), '1', 'PX', ttlMs, 'NX')) === 'OK'
  }
}
