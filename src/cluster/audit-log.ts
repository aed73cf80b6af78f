import type { FastifyBaseLogger } from 'fastify'
import type { Redis } from 'ioredis'
import { type AuditLog, type AuditQuery, type AuditRecord, matches } from '../audit/types.ts'
import type { ClusterKeys } from './keys.ts'

/** Options of {@link RedisAuditLog}. */
export interface RedisAuditLogOptions {
  readonly command: Redis
  readonly keys: ClusterKeys
  /** Records kept (`XADD MAXLEN ~`), GATEWAY_AUDIT_RECORDS. */
  readonly capacity: number
  readonly log: FastifyBaseLogger
  /** Records held while Redis is unreachable, written when it returns; the oldest go first. Default 1000. */
  readonly pendingMax?: number
}

const PAGE = 500

/**
 * The cluster's {@link AuditLog}: one capped Redis stream shared by every replica, newest read first.
 * `record` never waits: records go out in one pipeline per event-loop turn. While Redis is down they are
 * held (bounded) and written when it returns, in order; every record is also in the replica's log anyway.
 */
export class RedisAuditLog implements AuditLog {
  readonly #o: RedisAuditLogOptions
  readonly #pending: string[] = []
  #scheduled = false
  #dropped = 0

  constructor(options: RedisAuditLogOptions) {
    this.#o = options
    options.command.on('ready', () => this.#schedule())
  }

  record(record: AuditRecord): void {
    this.#pending.push(JSON.stringify(record))
    const max = this.#o.pendingMax ?? 1000
    if (this.#pending.length > max) {
      this.#dropped += this.#pending.length - max
      this.#pending.splice(0, this.#pending.length - max)
    }
    this.#schedule()
  }

  async recent(query: AuditQuery): Promise<AuditRecord[]> {
    const out: AuditRecord[] = []
    let end = '+'
    // Filters match few records at times: page back through the (capped) stream until enough are found.
    while (out.length < query.limit) {
      const page = (await this.#o.command.xrevrange(this.#o.keys.audit, end, '-', 'COUNT', PAGE)) as [
        string,
        string[],
      ][]
      for (const [, fields] of page) {
        const json = fields[1]
        if (fields[0] !== 'r' || json === undefined) continue
        let record: AuditRecord
        try {
          record = JSON.parse(json) as AuditRecord
        } catch {
          continue
        }
        if (!matches(record, query)) continue
        out.push(record)
        if (out.length >= query.limit) break
      }
      const last = page.at(-1)
      if (page.length < PAGE || !last) break
      end = `(${last[0]}`
    }
    return out
  }

  #schedule(): void {
    if (this.#scheduled || this.#pending.length === 0) return
    this.#scheduled = true
    setImmediate(() => void this.#flush())
  }

  async #flush(): Promise<void> {
    const { command, keys, capacity, log } = this.#o
    const batch = this.#pending.splice(0, this.#pending.length)
    if (command.status !== 'ready') {
      this.#pending.unshift(...batch)
      this.#scheduled = false
      return
    }
    const pipeline = command.pipeline()
    for (const json of batch) pipeline.xadd(keys.audit, 'MAXLEN', '~', capacity, '*', 'r', json)
    let retry: string[] = batch
    try {
      const results = await pipeline.exec()
      // Keep only what failed, so a retry writes no record twice.
      retry = batch.filter((_, i) => results?.[i]?.[0])
      if (retry.length > 0) throw results?.find(([e]) => e)?.[0]
      if (this.#dropped > 0) {
        log.warn({ dropped: this.#dropped }, 'audit records dropped while redis was unreachable')
        this.#dropped = 0
      }
    } catch (err) {
      this.#pending.unshift(...retry)
      log.warn({ err, pending: this.#pending.length }, 'audit records not written; kept for retry')
      this.#scheduled = false
      return // retried on the next record or reconnect, not in a loop
    }
    this.#scheduled = false
    this.#schedule()
  }
}
