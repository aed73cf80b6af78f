import { setTimeout as delay } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import { Counter, Gauge, type Registry } from 'prom-client'
import type { TokenVault } from '../sessions/token-vault.ts'
import type { RedisClient } from './connections.ts'
import { type JobLease, LeasedJob } from './job-lease.ts'
import { type ClusterKeys, RESEAL_JOB } from './keys.ts'
import type { RedisSessionStore, ResealResult } from './session-store.ts'

/** The re-seal job's lease name (defined with the keys: on a Redis Cluster it is the registry's hash tag). */
export { RESEAL_JOB }

/** Options of {@link Resealer}. */
export interface ResealerOptions {
  readonly store: RedisSessionStore
  readonly vault: TokenVault
  readonly command: RedisClient
  readonly keys: ClusterKeys
  readonly replicaId: string
  readonly lease: JobLease
  /** GATEWAY_LEASE_MS: the job's lease, and how often every replica announces its sealing key. */
  readonly leaseMs: number
  /** GATEWAY_RESEAL_PER_S: records re-sealed per second, at most. */
  readonly perSecond: number
  readonly log: FastifyBaseLogger
  /** Redis is known to be down: job-lease failures log at debug (see `LeasedJobOptions.quiet`). */
  readonly quiet?: () => boolean
  readonly registry: Registry
}

/**
 * Keeps every stored record on the sealing key (the first of GATEWAY_ENCRYPTION_KEY) after a rotation.
 *
 * Every replica opens every record anyway (its mirror), so each knows which are on an older key and reports
 * the count (`krg_sessions_on_old_key`: when it is 0 everywhere, the old key can go). One replica, the
 * holder of the `reseal` job lease, seals those again at a bounded rate, each write a compare-and-set
 * against the record as read (an admin write made meanwhile wins) and fenced by its lease.
 *
 * During a rolling restart replicas disagree on which key is first; re-sealing then would flip records back
 * and forth between the two keys. So every replica announces its sealing key's `kid`, and the holder waits
 * until every live replica announces the same one as its own.
 */
export class Resealer {
  readonly #o: ResealerOptions
  readonly #job: LeasedJob
  readonly #resealed: Counter<'result'>
  #announceTimer: NodeJS.Timeout | undefined
  #waiting = false

  constructor(options: ResealerOptions) {
    this.#o = options
    const registers = [options.registry]
    const { store } = options
    new Gauge({
      name: 'krg_sessions_on_old_key',
      help: 'Stored session records sealed with a key other than the first of GATEWAY_ENCRYPTION_KEY (0: the old key can be removed)',
      registers,
      collect() {
        this.set(store.onOldKey().length)
      },
    })
    new Gauge({
      name: 'krg_sessions_unreadable',
      help: 'Stored session records no configured key opens (the replica is not ready while any exist)',
      registers,
      collect() {
        this.set(store.unreadableCount)
      },
    })
    this.#resealed = new Counter({
      name: 'krg_sessions_resealed_total',
      help: 'Records sealed again with the first key, by result: resealed, changed (written meanwhile, left alone), fenced (lease lost)',
      labelNames: ['result'],
      registers,
    })
    const holding = new Gauge({
      name: 'krg_reseal_job_holder',
      help: 'Whether this replica holds the re-seal job lease (1) or not (0)',
      registers,
    })
    holding.set(0)
    this.#job = new LeasedJob({
      name: RESEAL_JOB,
      lease: options.lease,
      leaseMs: options.leaseMs,
      nextRunMs: (failures) => options.leaseMs * 2 ** Math.min(failures, 4),
      run: (run) => this.#run(run.fence, run.signal),
      log: options.log,
      ...(options.quiet === undefined ? {} : { quiet: options.quiet }),
      onHolder: (held) => holding.set(held ? 1 : 0),
    })
  }

  start(): void {
    void this.#announce()
    this.#announceTimer = setInterval(() => void this.#announce(), this.#o.leaseMs)
    this.#announceTimer.unref()
    this.#job.start()
  }

  async stop(): Promise<void> {
    clearInterval(this.#announceTimer)
    await this.#job.stop()
    await this.#o.command.hdel(this.#o.keys.keyrings, this.#o.replicaId).catch(() => 0)
  }

  /** `<kid> <expires ms>`: this replica's sealing key, valid for three announcement periods. */
  async #announce(): Promise<void> {
    const kid = await this.#o.vault.sealingKid()
    const expires = Date.now() + 3 * this.#o.leaseMs
    await this.#o.command
      .hset(this.#o.keys.keyrings, this.#o.replicaId, `${kid} ${expires}`)
      .catch((err: unknown) => this.#o.log.debug({ err }, 'sealing key not announced; retrying'))
  }

  /** Whether every live replica seals with `kid`; forgets replicas whose announcement expired. */
  async #agreed(kid: string): Promise<boolean> {
    const all = await this.#o.command.hgetall(this.#o.keys.keyrings)
    const now = Date.now()
    const expired: string[] = []
    let agreed = true
    for (const [replica, value] of Object.entries(all)) {
      const [theirs, expires] = value.split(' ')
      if (Number(expires) < now) expired.push(replica)
      else if (theirs !== kid) agreed = false
    }
    if (expired.length > 0) await this.#o.command.hdel(this.#o.keys.keyrings, ...expired)
    return agreed
  }

  async #run(fence: number, signal: AbortSignal): Promise<void> {
    const due = this.#o.store.onOldKey()
    if (due.length === 0) return
    if (!(await this.#agreed(await this.#o.vault.sealingKid()))) {
      if (!this.#waiting)
        this.#o.log.info(
          { records: due.length },
          're-seal waits: the replicas do not all seal with the same key yet (a rolling restart in progress?)',
        )
      this.#waiting = true
      return
    }
    this.#waiting = false
    const lease = { key: this.#o.keys.jobLease(RESEAL_JOB), fence }
    const gapMs = 1000 / this.#o.perSecond
    const started = Date.now()
    const counts: Partial<Record<ResealResult, number>> = {}
    for (const [i, kasmId] of due.entries()) {
      const wait = started + i * gapMs - Date.now()
      if (wait > 0) await delay(wait, undefined, { signal }).catch(() => {})
      if (signal.aborted) break
      const result = await this.#o.store.reseal(kasmId, lease)
      counts[result] = (counts[result] ?? 0) + 1
      if (result !== 'current') this.#resealed.inc({ result })
      if (result === 'fenced') break
    }
    this.#o.log.info({ ...counts, left: this.#o.store.onOldKey().length }, 'stored sessions re-sealed')
  }
}
