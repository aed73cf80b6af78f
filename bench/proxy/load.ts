/**
 * The proxy bench's HTTP client, over undici (the cheapest Node client, so the two cores go to the servers):
 * a closed loop of N connections for throughput, and an open loop at a fixed rate for latency, timed per
 * request in microseconds (a millisecond histogram cannot show a 1 ms target).
 */
import { performance } from 'node:perf_hooks'
import { Pool } from 'undici'

/** One request of a phase. */
export interface Shot {
  method: 'GET' | 'POST'
  path: string
  headers: Record<string, string>
  body?: string | Buffer
}

/**
 * Builds the next request of a contestant, each different where it must be (a message's key is unique over
 * all of the contestant's phases, its warm-up and slices included: a repeated one would be an idempotent retry).
 */
export type MakeShot = () => Shot

/** What a phase did. `failed` counts transport errors and answers other than 2xx. */
export interface LoadResult {
  ok: number
  failed: number
  /** The first failure seen (status or error message), to say why. */
  firstFailure: string | null
  seconds: number
  /** Per-request latency in ms, the fixed-rate loop only (sorted). */
  latencies: number[]
}

async function send(pool: Pool, shot: Shot): Promise<string | null> {
  try {
    const res = await pool.request({ ...shot, body: shot.body ?? null })
    // Read the whole answer: a proxy's cost includes streaming it.
    for await (const _ of res.body) {
    }
    return res.statusCode >= 200 && res.statusCode < 300 ? null : `status ${res.statusCode}`
  } catch (err) {
    return (err as Error).message
  }
}

function tally(): LoadResult & { add(failure: string | null): void } {
  return {
    ok: 0,
    failed: 0,
    firstFailure: null,
    seconds: 0,
    latencies: [],
    add(failure) {
      if (failure === null) this.ok++
      else {
        this.failed++
        this.firstFailure ??= failure
      }
    },
  }
}

/** `connections` requests in flight at all times for `ms`. */
export async function closedLoop(
  origin: string,
  make: MakeShot,
  connections: number,
  ms: number,
): Promise<LoadResult> {
  const pool = new Pool(origin, { connections })
  const result = tally()
  const started = performance.now()
  const end = started + ms
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() < end) result.add(await send(pool, make()))
    }),
  )
  result.seconds = (performance.now() - started) / 1000
  await pool.close()
  return { ...result }
}

/** `rate` requests per second for `ms`, each sent on time whatever the answers before it (an open loop). */
export async function fixedRate(
  origin: string,
  make: MakeShot,
  rate: number,
  ms: number,
): Promise<LoadResult> {
  const pool = new Pool(origin, { connections: 32 })
  const result = tally()
  const inFlight: Promise<void>[] = []
  const started = performance.now()
  let sent = 0
  while (performance.now() - started < ms) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate)
    for (; sent < due; sent++) {
      const t0 = performance.now()
      inFlight.push(
        send(pool, make()).then((failure) => {
          result.add(failure)
          if (failure === null) result.latencies.push(performance.now() - t0)
        }),
      )
    }
    await new Promise((r) => setTimeout(r, 1))
  }
  await Promise.all(inFlight)
  result.seconds = (performance.now() - started) / 1000
  result.latencies.sort((a, b) => a - b)
  await pool.close()
  return { ...result }
}

/** The `p`-quantile (0..1) of sorted values; NaN for none. */
export function quantile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number
}
