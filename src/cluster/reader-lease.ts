import type { ReaderLease } from '../events/bus.ts'
import { inSpan, redisAttributes } from '../tracing/spans.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'
import type { ClusterCommands } from './scripts.ts'

/** Where the leases of one kind live: the lease key of an id and the counter its fences come from. */
export interface LeaseKeyspace {
  lease(id: string): string
  fence(id: string): string
}

/** Options of {@link RedisReaderLease}. */
export interface RedisReaderLeaseOptions {
  readonly command: RedisClient & ClusterCommands
  readonly keys: ClusterKeys
  /** GATEWAY_LEASE_MS: how long a lease lives without renewal. */
  readonly leaseMs: number
  /**
   * Which keys: a session's reader lease by default; cluster-wide jobs pass `{lease: keys.jobLease, fence:
   * keys.jobFence}` and get the same fencing for a job name (see `job-lease.ts`).
   */
  readonly keyspace?: LeaseKeyspace
  /** Called on every change of what this replica holds (metrics, logs). */
  readonly onChange?: (event: 'acquired' | 'lost' | 'released', kasmId: string, held: number) => void
}

/** An acquire or renewal waiting for its turn's script. */
interface LeaseAsk {
  readonly kind: 'acquire' | 'renew'
  readonly kasmId: string
  /** The fence renewed (0 for an acquire). */
  readonly fence: number
}

/** An ask queued for the end of the turn, with its caller's promise. */
interface Waiting extends LeaseAsk {
  readonly resolve: (answer: number) => void
  readonly reject: (err: unknown) => void
}

/** Leases per script: bounds one script's run (Redis does nothing else meanwhile). */
const BATCH = 500

/** How long a fence counter outlives its last use; it is re-seeded from Redis TIME, so it still only rises. */
const COUNTER_TTL_MS = 7 * 24 * 3600 * 1000

/**
 * The cluster's {@link ReaderLease}: `SET NX PX` on the session's lease key, whose value is the holder's
 * fence, drawn from a per-session counter that only rises. The append script compares that value with the
 * appender's fence, so an owner that paused past its lease can never write after a new one took over.
 *
 * `renew` answers false when Redis says the lease is gone; when Redis cannot be asked, it throws while the
 * lease may still be alive and answers false once it has certainly expired (no renewal for a lease time).
 */
export class RedisReaderLease implements ReaderLease {
  readonly #o: RedisReaderLeaseOptions
  readonly #keys: LeaseKeyspace
  /** kasmId -> fence and the time of its last confirmed acquire/renew. */
  readonly #held = new Map<string, { fence: number; confirmedAt: number }>()
  /** This turn's asks, sent together once it ends (one Redis). */
  #asked: Waiting[] = []
  #closing = false

  constructor(options: RedisReaderLeaseOptions) {
    this.#o = options
    this.#keys = options.keyspace ?? { lease: options.keys.lease, fence: options.keys.fence }
  }

  /** Leases this replica holds now. */
  get held(): number {
    return this.#held.size
  }

  async acquire(kasmId: string): Promise<number | null> {
    if (this.#closing) return null
    const started = Date.now()
    const value = await this.#ask('acquire', kasmId, 0)
    if (value === 0) return null
    if (this.#closing) {
      // Shutdown began while the script ran: hand it straight back.
      await this.#o.command.krgRelease(this.#keys.lease(kasmId), String(value)).catch(() => 0)
      return null
    }
    this.#held.set(kasmId, { fence: value, confirmedAt: started })
    this.#o.onChange?.('acquired', kasmId, this.#held.size)
    return value
  }

  async renew(kasmId: string, fence: number): Promise<boolean> {
    if (this.#closing) return false
    const started = Date.now()
    let ok: boolean
    try {
      ok = (await this.#ask('renew', kasmId, fence)) === 1
    } catch (err) {
      const mine = this.#held.get(kasmId)
      if (mine?.fence === fence && started - mine.confirmedAt < this.#o.leaseMs) throw err
      this.#lost(kasmId, fence)
      return false
    }
    if (!ok) {
      this.#lost(kasmId, fence)
      return false
    }
    const mine = this.#held.get(kasmId)
    if (mine?.fence === fence) mine.confirmedAt = started
    else this.#held.set(kasmId, { fence, confirmedAt: started })
    return true
  }

  async release(kasmId: string, fence: number): Promise<void> {
    const mine = this.#held.get(kasmId)
    if (mine?.fence === fence) {
      this.#held.delete(kasmId)
      this.#o.onChange?.('released', kasmId, this.#held.size)
    }
    await this.#o.command.krgRelease(this.#keys.lease(kasmId), String(fence))
  }

  /**
   * Shutdown: refuses every further acquire and renew, and gives every held lease back at once so other
   * replicas take over without waiting for expiry. Never throws (Redis may be down: then leases expire).
   */
  async releaseAll(): Promise<number> {
    this.#closing = true
    const held = [...this.#held]
    await Promise.all(held.map(([kasmId, { fence }]) => this.release(kasmId, fence).catch(() => {})))
    return held.length
  }

  /**
   * One acquire (the fence, 0 when another owner holds the lease) or renewal (1 kept, 0 lost). With one Redis,
   * the asks of one turn of the event loop go as one script per {@link BATCH}: a replica renews and retries
   * its sessions' leases on a shared beat (`session-watch.ts`), so thousands of leases cost a few scripts a
   * second, not one each. On a Redis Cluster each session's keys have a slot of their own: one script each.
   */
  #ask(kind: LeaseAsk['kind'], kasmId: string, fence: number): Promise<number> {
    if (this.#o.command.isCluster) return this.#send(kind, [{ kind, kasmId, fence }]).then((a) => a[0] ?? 0)
    return new Promise((resolve, reject) => {
      this.#asked.push({ kind, kasmId, fence, resolve, reject })
      if (this.#asked.length === 1) setImmediate(() => this.#flush())
    })
  }

  #flush(): void {
    const asked = this.#asked
    this.#asked = []
    for (const kind of ['acquire', 'renew'] as const) {
      const of = asked.filter((a) => a.kind === kind)
      for (let i = 0; i < of.length; i += BATCH) {
        const batch = of.slice(i, i + BATCH)
        this.#send(kind, batch).then(
          (answers) => {
            for (const [j, a] of batch.entries()) a.resolve(answers[j] ?? 0)
          },
          (err: unknown) => {
            for (const a of batch) a.reject(err)
          },
        )
      }
    }
  }

  /** Sends asks of one kind, in one script; answers in their order. */
  async #send(kind: LeaseAsk['kind'], asks: readonly LeaseAsk[]): Promise<number[]> {
    const { command, leaseMs } = this.#o
    const only = asks.length === 1 ? asks[0] : undefined
    const script = kind === 'acquire' ? 'krgAcquire' : 'krgRenew'
    const attributes = redisAttributes(
      script,
      only === undefined ? { 'krg.leases': asks.length } : { 'krg.lease': only.kasmId },
    )
    return inSpan(`redis lease ${kind}`, attributes, async () => {
      if (kind === 'acquire') {
        const keys = asks.flatMap((a) => [this.#keys.lease(a.kasmId), this.#keys.fence(a.kasmId)])
        return (await command.krgAcquire(keys.length, ...keys, leaseMs, COUNTER_TTL_MS)).map(Number)
      }
      const keys = asks.map((a) => this.#keys.lease(a.kasmId))
      const fences = asks.map((a) => String(a.fence))
      return (await command.krgRenew(keys.length, ...keys, leaseMs, ...fences)).map(Number)
    })
  }

  #lost(kasmId: string, fence: number): void {
    if (this.#held.get(kasmId)?.fence !== fence) return
    this.#held.delete(kasmId)
    this.#o.onChange?.('lost', kasmId, this.#held.size)
  }
}
