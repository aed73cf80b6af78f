import type { ChainableCommander } from 'ioredis'
import { type ChatLinkRecord, type ChatLinkStore, chatAccountKey } from '../identity/chat-link-store.ts'
import { pipelined, transaction } from './client.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'

/**
 * Each link is a hash `{state, record, refreshAt}` that expires (PEXPIREAT) when the link ends; `record` is
 * the link as JSON (its IdP tokens sealed by the vault), `state` and `refreshAt` are the truth where they
 * differ from it (a suspension or a claimed refresh changes them without rewriting the record). A set per
 * person and per IdP session finds what a sign-out everywhere or a back-channel logout ends; a sorted set by
 * end time lists them for admins.
 */

/** KEYS: link. ARGV: record JSON, refreshAt ('' for none). 1 when the active link was updated. */
const update = `
if redis.call('HGET', KEYS[1], 'state') ~= 'active' then return 0 end
redis.call('HSET', KEYS[1], 'record', ARGV[1])
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'refreshAt') else redis.call('HSET', KEYS[1], 'refreshAt', ARGV[2]) end
return 1
`

/** KEYS: link. ARGV: now, lease ms. 1 when a due refresh was claimed (refreshAt moved to now + lease). */
const claimRefresh = `
if redis.call('HGET', KEYS[1], 'state') ~= 'active' then return 0 end
local due = redis.call('HGET', KEYS[1], 'refreshAt')
if not due or tonumber(due) > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'refreshAt', string.format('%.0f', tonumber(ARGV[1]) + tonumber(ARGV[2])))
return 1
`

/** KEYS: link. 1 when an active link was suspended. */
const suspend = `
if redis.call('HGET', KEYS[1], 'state') ~= 'active' then return 0 end
redis.call('HSET', KEYS[1], 'state', 'suspended')
redis.call('HDEL', KEYS[1], 'refreshAt')
return 1
`

interface ChatLinkCommands {
  krgChatLinkUpdate(key: string, record: string, refreshAt: string): Promise<number>
  krgChatLinkClaimRefresh(key: string, now: number, leaseMs: number): Promise<number>
  krgChatLinkSuspend(key: string): Promise<number>
}

/** The cluster's {@link ChatLinkStore}. Errors (Redis down) propagate: the caller answers 503 or says so. */
export class RedisChatLinkStore implements ChatLinkStore {
  readonly #redis: RedisClient & ChatLinkCommands
  readonly #keys: ClusterKeys

  constructor(command: RedisClient, keys: ClusterKeys) {
    const r = command as RedisClient & Partial<ChatLinkCommands>
    if (!r.krgChatLinkUpdate) {
      command.defineCommand('krgChatLinkUpdate', { numberOfKeys: 1, lua: update })
      command.defineCommand('krgChatLinkClaimRefresh', { numberOfKeys: 1, lua: claimRefresh })
      command.defineCommand('krgChatLinkSuspend', { numberOfKeys: 1, lua: suspend })
    }
    this.#redis = command as RedisClient & ChatLinkCommands
    this.#keys = keys
  }

  async put(record: ChatLinkRecord): Promise<void> {
    const k = chatAccountKey(record)
    const key = this.#keys.chatLink(k)
    const previous = await this.get(k)
    const sets = this.#indexes(record)
    const dropped = previous === null ? [] : this.#indexes(previous).filter((set) => !sets.includes(set))
    const index = sets.map(
      (set) => (tx: ChainableCommander) =>
        tx.sadd(set, k).pexpireat(set, record.expiresAt, 'GT').pexpireat(set, record.expiresAt, 'NX'),
    )
    // One MULTI with one Redis; on a Redis Cluster one per slot, in this order: the new indexes first, so
    // the link is never stored without the entries a logout everywhere finds it by; and on a cluster once
    // more after the link, since a logout between the two (reading the previous link) removes the entries.
    await transaction(this.#redis, [
      ...index,
      (tx) =>
        tx
          .del(key)
          .hset(key, {
            state: record.state,
            record: JSON.stringify(record),
            ...(record.idp?.refreshAt === undefined ? {} : { refreshAt: String(record.idp.refreshAt) }),
          })
          .pexpireat(key, record.expiresAt),
      (tx) => tx.zadd(this.#keys.chatLinks, record.expiresAt, k),
      ...(this.#redis.isCluster ? index : []),
      ...dropped.map((set) => (tx: ChainableCommander) => tx.srem(set, k)),
    ])
  }

  async get(k: string): Promise<ChatLinkRecord | null> {
    return parse(await this.#redis.hgetall(this.#keys.chatLink(k)))
  }

  async update(k: string, record: ChatLinkRecord): Promise<boolean> {
    const refreshAt = record.idp?.refreshAt === undefined ? '' : String(record.idp.refreshAt)
    const ok = await this.#redis.krgChatLinkUpdate(this.#keys.chatLink(k), JSON.stringify(record), refreshAt)
    return ok === 1
  }

  async claimRefresh(k: string, now: number, leaseMs: number): Promise<boolean> {
    return (await this.#redis.krgChatLinkClaimRefresh(this.#keys.chatLink(k), now, leaseMs)) === 1
  }

  async suspend(k: string): Promise<boolean> {
    return (await this.#redis.krgChatLinkSuspend(this.#keys.chatLink(k))) === 1
  }

  async remove(k: string): Promise<ChatLinkRecord | null> {
    const record = await this.get(k)
    // The link first, its index entries after (separate transactions on a Redis Cluster): an entry left
    // without its link is skipped by every reader.
    await transaction(this.#redis, [
      (tx) => tx.del(this.#keys.chatLink(k)),
      (tx) => tx.zrem(this.#keys.chatLinks, k),
      ...(record === null ? [] : this.#indexes(record)).map(
        (set) => (tx: ChainableCommander) => tx.srem(set, k),
      ),
    ])
    return record
  }

  async removeOf(sub: string): Promise<number> {
    return this.#removeAll(await this.#redis.smembers(this.#keys.chatLinksOf(sub)))
  }

  async removeIdpSession(iss: string, sid: string): Promise<number> {
    const ks = await this.#redis.smembers(this.#keys.chatLinksOfIdpSession(sid))
    return this.#removeAll(ks, (r) => r.idp?.iss === iss)
  }

  async removeIdpSubject(iss: string, sub: string, signedInBefore: number): Promise<number> {
    const ks = await this.#redis.smembers(this.#keys.chatLinksOf(sub))
    return this.#removeAll(ks, (r) => r.idp?.iss === iss && r.createdAt < signedInBefore)
  }

  async list(limit: number): Promise<ChatLinkRecord[]> {
    await this.#redis.zremrangebyscore(this.#keys.chatLinks, '-inf', Date.now())
    return this.#read(await this.#redis.zrange(this.#keys.chatLinks, 0, limit - 1))
  }

  async listOf(sub: string): Promise<ChatLinkRecord[]> {
    return this.#read(await this.#redis.smembers(this.#keys.chatLinksOf(sub)))
  }

  /** The connection belongs to the cluster plugin. */
  async close(): Promise<void> {}

  async #removeAll(ks: string[], matches: (record: ChatLinkRecord) => boolean = () => true): Promise<number> {
    let removed = 0
    for (const k of ks) {
      const record = await this.get(k)
      if (record !== null && matches(record) && (await this.remove(k)) !== null) removed++
    }
    return removed
  }

  async #read(ks: string[]): Promise<ChatLinkRecord[]> {
    if (ks.length === 0) return []
    const out: ChatLinkRecord[] = []
    const replies = await pipelined(
      this.#redis,
      ks.map((k) => (p: ChainableCommander) => p.hgetall(this.#keys.chatLink(k))),
    )
    for (const [err, hash] of replies) {
      if (err) throw err
      const record = parse(hash as Record<string, string>)
      if (record !== null) out.push(record)
    }
    return out
  }

  #indexes(record: ChatLinkRecord): string[] {
    return [
      this.#keys.chatLinksOf(record.sub),
      ...(record.idp?.sid === undefined ? [] : [this.#keys.chatLinksOfIdpSession(record.idp.sid)]),
    ]
  }
}

/** A stored link, with the hash fields that are the truth; null for none (or one that ended). */
function parse(hash: Record<string, string>): ChatLinkRecord | null {
  if (hash.record === undefined || (hash.state !== 'active' && hash.state !== 'suspended')) return null
  const record = JSON.parse(hash.record) as ChatLinkRecord
  if (record.expiresAt <= Date.now()) return null
  const idp =
    record.idp === undefined
      ? undefined
      : {
          iss: record.idp.iss,
          ...(record.idp.sid === undefined ? {} : { sid: record.idp.sid }),
          ...(hash.refreshAt === undefined ? {} : { refreshAt: Number(hash.refreshAt) }),
          sealedTokens: record.idp.sealedTokens,
        }
  return { ...record, state: hash.state, ...(idp === undefined ? {} : { idp }) }
}
