import type { FastifyBaseLogger } from 'fastify'
import type { ReaderLease } from '../events/bus.ts'

/**
 * The lease a job needs: the reader lease's contract (`acquire`/`renew`/`release` with a fence), keyed by the
 * job's name. In a cluster it is a {@link import('./reader-lease.ts').RedisReaderLease} over the job keyspace;
 * embedded it is the memory lease, which always grants (one process is the whole cluster). `stores.leasedJob`
 * (src/stores/plugin.ts) is the one place that chooses.
 */
export type JobLease = ReaderLease

/** What one run of a job gets. */
export interface JobRun {
  /** The fence of the lease this run holds: fenced writes carry it, so a stale holder's writes are refused. */
  readonly fence: number
  /** Aborted when the lease is lost or the job stops: stop at the next step. */
  readonly signal: AbortSignal
}

/** Options of {@link LeasedJob}. */
export interface LeasedJobOptions {
  /** Names the lease; every replica running the same job must use the same name. */
  readonly name: string
  readonly lease: JobLease
  /** GATEWAY_LEASE_MS: renewed every third of it, acquisition retried every half of it. */
  readonly leaseMs: number
  /** The delay before the next run, after a run that succeeded, or that failed `failures` times in a row. */
  readonly nextRunMs: (failures: number) => number
  /** One run; a throw counts as a failure (the job logs its own reasons). */
  readonly run: (run: JobRun) => Promise<void>
  readonly log: FastifyBaseLogger
  /** While true (Redis is known to be down), failures that follow from it log at debug: one warning per outage. */
  readonly quiet?: () => boolean
  /** Called when this replica starts or stops holding the job (metrics, logs). */
  readonly onHolder?: (holding: boolean) => void
}

/** Where a {@link LeasedJob} is: not running, waiting for the lease, or holding it and running the job. */
type JobState =
  | { readonly kind: 'stopped' }
  | { readonly kind: 'standby'; timer: NodeJS.Timeout | null }
  | {
      readonly kind: 'leading'
      readonly fence: number
      readonly controller: AbortController
      renewTimer: NodeJS.Timeout | null
      runTimer: NodeJS.Timeout | null
      running: Promise<void> | null
      failures: number
    }

/**
 * A periodic job that exactly one replica runs at a time (Kasm sync, token re-seal). Every replica starts
 * it; the one that holds the job's fenced lease runs it, renews the lease every third of its length, and
 * hands over on shutdown; the others retry the lease every half length, so a dead holder is replaced within
 * about one lease. A holder that loses its lease (paused past it, Redis lost it) aborts its run at once, and
 * every write it still attempts carries a fence the new holder has superseded.
 */
export class LeasedJob {
  readonly #o: LeasedJobOptions
  #state: JobState = { kind: 'stopped' }

  constructor(options: LeasedJobOptions) {
    this.#o = options
  }

  /** Whether this replica holds the job now. */
  get leading(): boolean {
    return this.#state.kind === 'leading'
  }

  /** Starts competing for the job (idempotent). */
  start(): void {
    if (this.#state.kind !== 'stopped') return
    this.#state = { kind: 'standby', timer: null }
    void this.#tryAcquire()
  }

  /** Stops: aborts a run in progress, waits for it, and gives the lease back so another replica takes over now. */
  async stop(): Promise<void> {
    const state = this.#state
    this.#state = { kind: 'stopped' }
    if (state.kind === 'standby' && state.timer !== null) clearTimeout(state.timer)
    if (state.kind !== 'leading') return
    this.#clear(state)
    state.controller.abort()
    await state.running
    this.#o.onHolder?.(false)
    await this.#o.lease.release(this.#o.name, state.fence).catch(() => {})
  }

  async #tryAcquire(): Promise<void> {
    let fence: number | null = null
    try {
      fence = await this.#o.lease.acquire(this.#o.name)
    } catch (err) {
      this.#o.log.debug({ err, job: this.#o.name }, 'job lease unavailable; retrying')
    }
    if (this.#state.kind !== 'standby') {
      // Stopped while asking: hand back what was granted.
      if (fence !== null) await this.#o.lease.release(this.#o.name, fence).catch(() => {})
      return
    }
    if (fence === null) {
      const state = this.#state
      state.timer = timer(this.#o.leaseMs / 2, () => {
        state.timer = null
        void this.#tryAcquire()
      })
      return
    }
    const leading: JobState & { kind: 'leading' } = {
      kind: 'leading',
      fence,
      controller: new AbortController(),
      renewTimer: null,
      runTimer: null,
      running: null,
      failures: 0,
    }
    this.#state = leading
    this.#o.log.info({ job: this.#o.name }, 'this replica runs the job now')
    this.#o.onHolder?.(true)
    leading.renewTimer = timer(this.#o.leaseMs / 3, () => void this.#renew(leading))
    this.#schedule(leading, 0)
  }

  async #renew(state: JobState & { kind: 'leading' }): Promise<void> {
    state.renewTimer = null
    let held: boolean
    try {
      held = await this.#o.lease.renew(this.#o.name, state.fence)
    } catch (err) {
      // Redis cannot be asked but the lease may still be alive: keep going, ask again.
      const level = this.#o.quiet?.() ? 'debug' : 'warn'
      this.#o.log[level]({ err, job: this.#o.name }, 'job lease renewal failed; retrying')
      held = true
    }
    if (this.#state !== state) return
    if (held) {
      state.renewTimer = timer(this.#o.leaseMs / 3, () => void this.#renew(state))
      return
    }
    // A handover, not a fault: the job goes on on another replica (or here again at the next acquire).
    this.#o.log.info({ job: this.#o.name }, 'job lease lost; another replica runs the job now')
    this.#clear(state)
    state.controller.abort()
    this.#o.onHolder?.(false)
    this.#state = { kind: 'standby', timer: null }
    void this.#tryAcquire()
  }

  #schedule(state: JobState & { kind: 'leading' }, ms: number): void {
    state.runTimer = timer(ms, () => {
      state.runTimer = null
      state.running = this.#runOnce(state)
    })
  }

  async #runOnce(state: JobState & { kind: 'leading' }): Promise<void> {
    try {
      await this.#o.run({ fence: state.fence, signal: state.controller.signal })
      state.failures = 0
    } catch (err) {
      state.failures++
      if (!state.controller.signal.aborted)
        this.#o.log.debug({ err, job: this.#o.name, failures: state.failures }, 'job run failed')
    }
    state.running = null
    if (this.#state === state) this.#schedule(state, this.#o.nextRunMs(state.failures))
  }

  #clear(state: JobState & { kind: 'leading' }): void {
    if (state.renewTimer !== null) clearTimeout(state.renewTimer)
    if (state.runTimer !== null) clearTimeout(state.runTimer)
    state.renewTimer = null
    state.runTimer = null
  }
}

function timer(ms: number, fn: () => void): NodeJS.Timeout {
  const t = setTimeout(fn, Math.max(0, Math.round(ms)))
  t.unref()
  return t
}
