import type { FastifyBaseLogger } from 'fastify'
import { type AuditLog, type AuditQuery, type AuditRecord, matches } from '../audit/types.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'

/** Options of {@link RedisAuditLog}. */
export interface RedisAuditLogOptions {
  readonly command: RedisClient
  readonly keys: ClusterKeys
  /** The stream: `keys.audit` (default), or `keys.auditRefused` for the refusals. */
  readonly key?: string
  /** Records kept (`XADD MAXLEN ~`): GATEWAY_AUDIT_RECORDS, or GATEWAY_AUDIT_REFUSED_RECORDS. */
  readonly capacity: number
  readonly log: FastifyBaseLogger
  /**
   * Records held while Redis cannot take them (unreachable, or refusing the last write), written when it
   * can; past this many the oldest go first. Default 1000. Never applied while Redis takes writes: records
   * made while one is in flight wait for it, however many.
   */
  readonly pendingMax?: number
  /** How long a record waits for others to share its write (ms). Default {@link FLUSH_MS}. */
  readonly flushMs?: number
}

const PAGE = 500

/**
 * KEYS: the audit stream. ARGV: its capacity, then one record (JSON) each. Appends them in order, each
 * trimmed `MAXLEN ~`, and returns how many were written: should one fail (Redis out of memory), the ones
 * before it are in the stream and the rest are not, so a retry writes none twice.
 */
const append = `
for i = 2, #ARGV do
  local added = redis.pcall('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'r', ARGV[i])
  if type(added) == 'table' and added.err then return i - 2 end
end
return #ARGV - 1
`

interface AppendCommand {
  krgAuditAppend(key: string, capacity: number, ...records: string[]): Promise<number>
}

/**
 * Records are written at most this long after they are made, together: under load a write request costs a
 * small share of one script call, instead of a round trip of its own.
 */
const FLUSH_MS = 100
/** Records that are written at once, without waiting out {@link FLUSH_MS}. */
const BATCH_MAX = 500

/**
 * The cluster's {@link AuditLog}: one capped Redis stream shared by every replica, newest read first.
 * `record` never waits: records go out in one script call at most {@link FLUSH_MS} after the first of them (a
 * read on this replica writes what is pending first, so it sees its own records). While Redis is down they
 * are held (bounded) and written when it returns, in order; every record is also in the replica's log anyway.
 */
export class RedisAuditLog implements AuditLog {
  readonly #o: RedisAuditLogOptions
  readonly #key: string
  readonly #pending: string[] = []
  #timer: NodeJS.Timeout | null = null
  #writing: Promise<void> | null = null
  /** The last write found Redis unreachable or was refused: what is pending may never go out, so it is bounded. */
  #stalled = false
  #dropped = 0

  constructor(options: RedisAuditLogOptions) {
    this.#o = options
    this.#key = options.key ?? options.keys.audit
    const command = options.command as RedisClient & Partial<AppendCommand>
    if (!command.krgAuditAppend) command.defineCommand('krgAuditAppend', { numberOfKeys: 1, lua: append })
    options.command.on('ready', () => this.#schedule())
  }

  record(record: AuditRecord): void {
    this.#pending.push(JSON.stringify(record))
    const max = this.#o.pendingMax ?? 1000
    if (this.#pending.length > max && (this.#stalled || this.#o.command.status !== 'ready')) {
      this.#dropped += this.#pending.length - max
      this.#pending.splice(0, this.#pending.length - max)
    }
    this.#schedule()
  }

  /** Writes every pending record now (those of a write in flight included): before a read, and at shutdown. */
  async flush(): Promise<void> {
    this.#cancel()
    await this.#writing
    this.#cancel()
    if (this.#pending.length > 0) await this.#write()
  }

  async recent(query: AuditQuery): Promise<AuditRecord[]> {
    await this.flush()
    const out: AuditRecord[] = []
    let end = '+'
    // Filters match few records at times: page back through the (capped) stream until enough are found.
    while (out.length < query.limit) {
      const page = (await this.#o.command.xrevrange(this.#key, end, '-', 'COUNT', PAGE)) as [
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
    if (this.#writing !== null || this.#pending.length === 0) return
    if (this.#pending.length >= BATCH_MAX) {
      this.#cancel()
      void this.#write()
      return
    }
    if (this.#timer !== null) return
    this.#timer = setTimeout(() => {
      this.#timer = null
      void this.#write()
    }, this.#o.flushMs ?? FLUSH_MS)
    // flush() at shutdown writes what is left; a timer must not hold the process.
    this.#timer.unref()
  }

  #cancel(): void {
    if (this.#timer === null) return
    clearTimeout(this.#timer)
    this.#timer = null
  }

  #write(): Promise<void> {
    const writing = this.#send().then((written) => {
      this.#writing = null
      // Records made meanwhile; after a failure the next record or reconnection retries, not a loop.
      if (written) this.#schedule()
    })
    this.#writing = writing
    return writing
  }

  /**
   * Every pending record in one script call (one command to encode and one round trip, however many records);
   * false when some are kept for a retry (Redis down, a refusal).
   */
  async #send(): Promise<boolean> {
    const { command, capacity, log } = this.#o
    if (this.#pending.length === 0) return true
    if (command.status !== 'ready') {
      this.#stalled = true
      return false
    }
    const batch = this.#pending.splice(0, this.#pending.length)
    let retry: string[] = batch
    try {
      const written = await (command as RedisClient & AppendCommand).krgAuditAppend(
        this.#key,
        capacity,
        ...batch,
      )
      // Keep only what was not written, so a retry writes no record twice.
      retry = batch.slice(written)
      if (retry.length > 0)
        throw new Error(`redis refused an audit record (${written} of ${batch.length} written)`)
      this.#stalled = false
      if (this.#dropped > 0) {
        log.warn({ dropped: this.#dropped }, 'audit records dropped while redis could not take them')
        this.#dropped = 0
      }
    } catch (err) {
      this.#stalled = true
      this.#pending.unshift(...retry)
      log.warn({ err, pending: this.#pending.length }, 'audit records not written; kept for retry')
      return false
    }
    return true
  }
}
