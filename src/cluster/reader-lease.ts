import type { ReaderLease } from '../events/bus.ts'
import { inSpan, redisAttributes } from '../tracing/spans.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'
import type { ClusterCommands } from './scripts.ts'

/** Where the leases of one kind live: the lease key of an id and the counter its fences come from. */
export interface LeaseKeyspace {
  lease(id: string): string
  fence(id: string): string
  /** The replicas waiting for the lease (their acquire found it held). */
  waiters(id: string): string
}

/** Options of {@link RedisReaderLease}. */
export interface RedisReaderLeaseOptions {
  readonly command: RedisClient & ClusterCommands
  readonly keys: ClusterKeys
  /** GATEWAY_LEASE_MS: how long a lease lives without renewal. */
  readonly leaseMs: number
  /** This replica, as the waiters of a lease name it. */
  readonly replica: string
  /**
   * Which keys: a session's reader lease by default; cluster-wide jobs pass `{lease: keys.jobLease, fence:
   * keys.jobFence, waiters: keys.jobWaiters}` and get the same fencing for a job name (see `job-lease.ts`).
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

/**
 * What Redis answered an ask: `value` is the fence (0: held by another) or, for a renewal, 1 kept and 0 lost;
 * `watchers`, the replicas watching the lease then (the holder and the waiters).
 */
interface LeaseAnswer {
  readonly value: number
  readonly watchers: number
}

/** An ask queued for the end of the turn, with its caller's promise. */
interface Waiting extends LeaseAsk {
  readonly resolve: (answer: LeaseAnswer) => void
  readonly reject: (err: unknown) => void
}

/** A renewal's reply: 0 lost, else the replicas watching (so kept). */
function renewal(reply: number | string): LeaseAnswer {
  const watchers = Number(reply)
  return watchers > 0 ? { value: 1, watchers } : { value: 0, watchers: 1 }
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
  /** kasmId -> replicas watching it, from the last answer about it. */
  readonly #watchers = new Map<string, number>()
  /** This turn's asks, sent together once it ends (one Redis). */
  #asked: Waiting[] = []
  #closing = false

  constructor(options: RedisReaderLeaseOptions) {
    this.#o = options
    this.#keys = options.keyspace ?? {
      lease: options.keys.lease,
      fence: options.keys.fence,
      waiters: options.keys.leaseWaiters,
    }
  }

  /** Leases this replica holds now. */
  get held(): number {
    return this.#held.size
  }

  async acquire(kasmId: string): Promise<number | null> {
    if (this.#closing) return null
    const started = Date.now()
    const { value } = await this.#ask('acquire', kasmId, 0)
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
      ok = (await this.#ask('renew', kasmId, fence)).value === 1
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

  /**
   * How many replicas watch the session, this one included, as of the last acquire or renewal here: the
   * holder and every replica whose acquire found it held (within a lease time). 1 when not asked yet.
   */
  watchers(kasmId: string): number {
    return this.#watchers.get(kasmId) ?? 1
  }

  /** This replica stopped watching the session: what was learnt of it goes. */
  forget(kasmId: string): void {
    this.#watchers.delete(kasmId)
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
  #ask(kind: LeaseAsk['kind'], kasmId: string, fence: number): Promise<LeaseAnswer> {
    const answered = this.#o.command.isCluster
      ? this.#send(kind, [{ kind, kasmId, fence }]).then((a) => a[0] as LeaseAnswer)
      : new Promise<LeaseAnswer>((resolve, reject) => {
          this.#asked.push({ kind, kasmId, fence, resolve, reject })
          if (this.#asked.length === 1) setImmediate(() => this.#flush())
        })
    return answered.then((answer) => {
      this.#watchers.set(kasmId, answer.watchers)
      return answer
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
            for (const [j, a] of batch.entries()) a.resolve(answers[j] ?? { value: 0, watchers: 1 })
          },
          (err: unknown) => {
            for (const a of batch) a.reject(err)
          },
        )
      }
    }
  }

  /** Sends asks of one kind, in one script; answers in their order. */
  async #send(kind: LeaseAsk['kind'], asks: readonly LeaseAsk[]): Promise<LeaseAnswer[]> {
    const { command, leaseMs, replica } = this.#o
    const k = this.#keys
    const only = asks.length === 1 ? asks[0] : undefined
    const script = kind === 'acquire' ? 'krgAcquire' : 'krgRenew'
    const attributes =
      only === undefined
        ? redisAttributes(`${script}Many`, { 'krg.leases': asks.length })
        : redisAttributes(script, { 'krg.lease': only.kasmId })
    return inSpan(`redis lease ${kind}`, attributes, async () => {
      if (only !== undefined && kind === 'acquire') {
        const id = only.kasmId
        const [fence, watchers] = await command.krgAcquire(
          k.lease(id),
          k.fence(id),
          k.waiters(id),
          leaseMs,
          COUNTER_TTL_MS,
          replica,
        )
        return [{ value: Number(fence), watchers: Number(watchers) }]
      }
      if (only !== undefined) {
        const id = only.kasmId
        return [renewal(await command.krgRenew(k.lease(id), k.waiters(id), String(only.fence), leaseMs))]
      }
      if (kind === 'acquire') {
        const keys = asks.flatMap((a) => [k.lease(a.kasmId), k.fence(a.kasmId), k.waiters(a.kasmId)])
        const flat = await command.krgAcquireMany(keys.length, ...keys, leaseMs, COUNTER_TTL_MS, replica)
        return asks.map((_, i) => ({ value: Number(flat[2 * i]), watchers: Number(flat[2 * i + 1]) }))
      }
      const keys = asks.flatMap((a) => [k.lease(a.kasmId), k.waiters(a.kasmId)])
      const fences = asks.map((a) => String(a.fence))
      return (await command.krgRenewMany(keys.length, ...keys, leaseMs, ...fences)).map(renewal)
    })
  }

  #lost(kasmId: string, fence: number): void {
    if (this.#held.get(kasmId)?.fence !== fence) return
    this.#held.delete(kasmId)
    this.#o.onChange?.('lost', kasmId, this.#held.size)
  }
}
