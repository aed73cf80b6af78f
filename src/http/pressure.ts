import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks'
import { getHeapStatistics } from 'node:v8'

/** How often the pressure is sampled. */
const SAMPLE_MS = 1000

/** The event-loop delay histogram's resolution; its mean is read less this (the timer's own wait). */
const RESOLUTION_MS = 10

/** Which threshold a replica is over, as `krg_requests_shed_total{reason}` says it. */
export type PressureReason = 'eventLoopDelay' | 'heapUsedBytes'

/** The thresholds; 0 turns one off. */
export interface PressureLimits {
  readonly maxEventLoopDelayMs: number
  readonly maxHeapUsedBytes: number
}

/**
 * The replica's pressure, sampled once a second: the event loop's mean delay over the last second and the
 * heap in use. Neither source needs a file descriptor: `process.memoryUsage()` (what @fastify/under-pressure
 * sampled) reads `/proc/self/stat` for the RSS, and at the descriptor limit it throws EMFILE from a timer,
 * which ended the process and dropped every viewer. The RSS is not a threshold here.
 */
export class PressureSampler {
  readonly #limits: PressureLimits
  readonly #histogram: IntervalHistogram
  readonly #timer: NodeJS.Timeout
  #eventLoopDelayMs = 0
  #heapUsedBytes = 0

  constructor(limits: PressureLimits) {
    this.#limits = limits
    this.#histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
    this.#histogram.enable()
    this.#timer = setInterval(() => this.#sample(), SAMPLE_MS)
    this.#timer.unref()
  }

  /** The last sample. */
  get eventLoopDelayMs(): number {
    return this.#eventLoopDelayMs
  }

  get heapUsedBytes(): number {
    return this.#heapUsedBytes
  }

  /** The threshold the last sample is over, or null. */
  over(): PressureReason | null {
    const { maxEventLoopDelayMs, maxHeapUsedBytes } = this.#limits
    if (maxEventLoopDelayMs > 0 && this.#eventLoopDelayMs > maxEventLoopDelayMs) return 'eventLoopDelay'
    if (maxHeapUsedBytes > 0 && this.#heapUsedBytes > maxHeapUsedBytes) return 'heapUsedBytes'
    return null
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#histogram.disable()
  }

  #sample(): void {
    const mean = this.#histogram.mean / 1e6 - RESOLUTION_MS
    // No delay recorded at all: the loop was blocked for the whole second.
    this.#eventLoopDelayMs = Number.isNaN(mean) ? Number.POSITIVE_INFINITY : Math.max(0, mean)
    this.#histogram.reset()
    this.#heapUsedBytes = getHeapStatistics().used_heap_size
  }
}
