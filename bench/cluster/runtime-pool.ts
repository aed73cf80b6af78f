/**
 * The cluster bench's simulated runtimes spread over several child processes (bench/cluster/runtimes.ts),
 * answering as one. An event's delay includes the pauses of the process that wrote it; with every runtime in
 * one process, that process's collections grew with the session count and showed in the gateway's p99.
 */
import { Child } from '../common/ipc.ts'

/** What the runtimes' `stats` command answers, over every process in runtime order. */
export interface RuntimeStats {
  emitted: number[]
  streams: number[]
}

/** `count` runtimes over at most `processes` processes, as evenly as they go: each one's first and count. */
export function shares(count: number, processes: number): { first: number; count: number }[] {
  const n = Math.max(1, Math.min(count, processes))
  const out: { first: number; count: number }[] = []
  for (let i = 0, first = 0; i < n; i++) {
    const here = Math.floor(count / n) + (i < count % n ? 1 : 0)
    out.push({ first, count: here })
    first += here
  }
  return out
}

export class RuntimePool {
  readonly #children: Child[]

  /** `count` runtimes over at most `processes` children ({@link shares}). */
  constructor(count: number, processes: number) {
    this.#children = shares(count, processes).map(
      (share) =>
        new Child('cluster/runtimes.ts', {
          BENCH_RUNTIMES: String(share.count),
          BENCH_RUNTIME_FIRST: String(share.first),
          BENCH_RUNTIME_TOTAL: String(count),
        }),
    )
  }

  get pids(): number[] {
    return this.#children.map((c) => c.pid)
  }

  /** Every runtime's URL, in runtime order. */
  async urls(): Promise<string[]> {
    const each = await Promise.all(this.#children.map((c) => c.call<{ urls: string[] }>('info')))
    return each.flatMap((e) => e.urls)
  }

  /** Every runtime emits `perSecond` events a second, staggered over the second by its place; 0 stops. */
  async rate(perSecond: number): Promise<void> {
    await Promise.all(this.#children.map((c) => c.call('rate', { perSecond })))
  }

  async stats(): Promise<RuntimeStats> {
    const each = await Promise.all(this.#children.map((c) => c.call<RuntimeStats>('stats')))
    return { emitted: each.flatMap((e) => e.emitted), streams: each.flatMap((e) => e.streams) }
  }

  async stop(): Promise<void> {
    await Promise.all(this.#children.map((c) => c.stop()))
  }
}
