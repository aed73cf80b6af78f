import { createHash } from 'node:crypto'
import type { ChainableCommander } from 'ioredis'
import {
  type DeliveryLedger,
  type DeliveryQuery,
  type DeliveryRecord,
  matchesQuery,
} from '../notify/ledger.ts'
import { pipelined } from './client.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'

/** How long a delivery's record is kept: longer than any stream a replica could replay it from. */
const RECORD_TTL_MS = 7 * 24 * 3600 * 1000
/** Deliveries the admin API can list. */
const RECENT = 1000

/**
 * The cluster's {@link DeliveryLedger}: `SET NX PX` per delivery (the one claim every replica races for), and
 * a capped list of recent keys for the admin API. A replica that claimed a delivery and crashed leaves its
 * record: the next owner sends it again only if the record says the last attempt certainly failed.
 */
export class RedisDeliveryLedger implements DeliveryLedger {
  readonly command: RedisClient
  readonly keys: ClusterKeys

  constructor(command: RedisClient, keys: ClusterKeys) {
    this.command = command
    this.keys = keys
  }

  #key(key: string, kasmId: string): string {
    return this.keys.notifyDelivery(kasmId, createHash('sha256').update(key).digest('hex').slice(0, 32))
  }

  async claim(key: string, record: DeliveryRecord): Promise<DeliveryRecord | null> {
    const k = this.#key(key, record.kasmId)
    const set = await this.command.set(k, JSON.stringify(record), 'PX', RECORD_TTL_MS, 'NX')
    if (set === 'OK') {
      await this.command
        .multi()
        .lpush(this.keys.notifyRecent, k)
        .ltrim(this.keys.notifyRecent, 0, RECENT - 1)
        .exec()
      return null
    }
    const known = await this.command.get(k)
    // Gone between the two calls (expired): nobody holds it any more, but say so as held rather than race.
    return known === null ? record : (parseRecord(known) ?? record)
  }

  async update(key: string, record: DeliveryRecord): Promise<void> {
    await this.command.set(this.#key(key, record.kasmId), JSON.stringify(record), 'KEEPTTL', 'XX')
  }

  async recent(query: DeliveryQuery): Promise<DeliveryRecord[]> {
    const keys = await this.command.lrange(this.keys.notifyRecent, 0, RECENT - 1)
    if (keys.length === 0) return []
    const out: DeliveryRecord[] = []
    // Not MGET: each delivery's key is in its session's slot, and on a Redis Cluster MGET takes one slot.
    const replies = await pipelined(
      this.command,
      keys.map((k) => (p: ChainableCommander) => p.get(k)),
    )
    for (const [err, raw] of replies) {
      if (err) throw err
      const record = typeof raw === 'string' ? parseRecord(raw) : null
      if (record !== null && matchesQuery(record, query)) out.push(record)
      if (out.length >= query.limit) break
    }
    return out
  }
}

function parseRecord(raw: string): DeliveryRecord | null {
  try {
    const value: unknown = JSON.parse(raw)
    return typeof value === 'object' && value !== null ? (value as DeliveryRecord) : null
  } catch {
    return null
  }
}
