/**
 * The cluster bench's figures per event and its targets (issue 28), as ratios to the anchor scenario (the
 * smallest session count) of the same run. Pure: test/bench/cluster-bench.test.ts checks it.
 */

/** What one scenario measured over its phase. */
export interface Scenario {
  sessions: number
  replicas: number
  viewers: number
  /** Upstream event streams open on the runtimes: one reader per session is the lease's promise. */
  upstreamStreams: number
  /** Events the runtimes wrote, summed over sessions (an event of a runtime with k sessions counts k times). */
  sessionEvents: number
  /** Deliveries the viewers should have read, and did. */
  expected: number
  delivered: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  /** Overview frames the replicas' overview streams read over the phase (all replicas). */
  overviewFrames: number
  /** Wall time of the measured phase (emission and the deliveries' tail). */
  phaseS: number
  replicaCpuS: number
  redisCpuS: number
  /** INFO total_commands_processed over the phase, summed over the Redis masters. */
  redisCommands: number
  /**
   * The same three per second with everything connected and watched but no event written (heartbeats,
   * presence, leases, blocked reads): the part of the phase's cost that is not per event.
   */
  idle: { replicaCpuPerS: number; redisCpuPerS: number; redisCommandsPerS: number }
  /** Replica RSS growth from boot to watching every session (overview and readers open, no viewer yet), per session, mean of the replicas. */
  memKiBPerWatchedSession: number
  /** CPU of the bench's own processes over the phase (runtimes and viewers share the two cores). */
  benchCpuS: number
  /**
   * The mean time, in µs, the main threads of the replicas, of Redis and of the bench's processes waited on a
   * run queue each time they were woken to run, over the phase (/proc/<pid>/schedstat): every process of an
   * event's way shares the two cores, and a wait for a CPU is delay the gateway's code does not spend.
   */
  runQueueWait: { replicas: number; redis: number; bench: number }
  /** The phase's window, epoch ms (`bench/probes/stages-summary.mjs --from --to`). */
  phase: { from: number; to: number }
  /** 1-minute load average when the phase started and when it ended. */
  loadBefore: number
  loadAfter: number
  perCommand: Record<string, number>
  /**
   * Per replica, in start order: the reader leases it held after the phase (the sessions whose events it read
   * and appended) and the p99 delay of the viewers reading from it, so a tail can be told to the replica.
   */
  byReplica: { leases: number; p99Ms: number }[]
}

/**
 * Per-event figures of a scenario: the phase's cost above its idle cost, divided by the events. At 1 event
 * per second per session the idle cost (timers, heartbeats, presence, blocked reads) is most of the phase at
 * 50 sessions: divided by the events it would make every larger run look cheaper per event than it is.
 */
export interface PerEvent {
  /** Replica CPU µs per delivered event (viewer deliveries), above idle. */
  replicaCpuUsPerDelivery: number
  /** Replica CPU µs per session event (what the replicas spend per event whether or not anyone views it). */
  replicaCpuUsPerEvent: number
  redisCpuUsPerEvent: number
  redisCommandsPerEvent: number
  /** Replica CPU µs per delivery with the idle cost included (what the replicas spent in all). */
  replicaCpuUsPerDeliveryTotal: number
}

export function perEvent(s: Scenario): PerEvent {
  const per = (n: number, d: number) => (d > 0 ? n / d : Number.NaN)
  const replica = Math.max(0, s.replicaCpuS - s.idle.replicaCpuPerS * s.phaseS)
  const redis = Math.max(0, s.redisCpuS - s.idle.redisCpuPerS * s.phaseS)
  const commands = Math.max(0, s.redisCommands - s.idle.redisCommandsPerS * s.phaseS)
  return {
    replicaCpuUsPerDelivery: per(replica * 1e6, s.delivered),
    replicaCpuUsPerEvent: per(replica * 1e6, s.sessionEvents),
    redisCpuUsPerEvent: per(redis * 1e6, s.sessionEvents),
    redisCommandsPerEvent: per(commands, s.sessionEvents),
    replicaCpuUsPerDeliveryTotal: per(s.replicaCpuS * 1e6, s.delivered),
  }
}

/** A target: the figure at most `max` times the anchor's. */
export interface Target {
  readonly name: string
  readonly max: number
  readonly figure: (s: Scenario) => number
}

export const TARGETS: readonly Target[] = [
  { name: 'replica CPU per delivered event', max: 1.5, figure: (s) => perEvent(s).replicaCpuUsPerDelivery },
  { name: 'p99 delivery delay', max: 1.5, figure: (s) => s.p99Ms },
  // "Flat within 1.3x": cheaper per event at scale passes too.
  { name: 'Redis CPU per event', max: 1.3, figure: (s) => perEvent(s).redisCpuUsPerEvent },
]

export interface Verdict {
  readonly sessions: number
  readonly target: string
  readonly ratio: number
  readonly max: number
  readonly pass: boolean
}

/**
 * Every target for every scenario but the anchor (the fewest sessions), plus "no loss": every expected
 * delivery read, and one upstream stream per session. A ratio that cannot be computed (a zero or missing
 * figure) fails: a target is met only when it was measured.
 */
export function verdicts(scenarios: readonly Scenario[]): Verdict[] {
  if (scenarios.length === 0) return []
  const anchor = scenarios.reduce((a, b) => (b.sessions < a.sessions ? b : a))
  const out: Verdict[] = []
  for (const s of scenarios) {
    const complete = s.expected > 0 && s.delivered === s.expected && s.upstreamStreams === s.sessions
    out.push({
      sessions: s.sessions,
      target: 'every event delivered, one reader per session',
      ratio: s.expected > 0 ? s.delivered / s.expected : Number.NaN,
      max: 1,
      pass: complete,
    })
    if (s === anchor) continue
    for (const t of TARGETS) {
      const ratio = t.figure(s) / t.figure(anchor)
      out.push({
        sessions: s.sessions,
        target: t.name,
        ratio,
        max: t.max,
        pass: Number.isFinite(ratio) && ratio <= t.max,
      })
    }
  }
  return out
}

const fmt = (n: number, d = 2) => (Number.isFinite(n) ? n.toFixed(d) : '-')

/** The results file's tables: the figures per scenario, then each verdict marked pass or FAIL. */
export function tables(scenarios: readonly Scenario[]): string[] {
  const lines = [
    '| sessions | replicas | viewers | upstream streams | delivered / expected | p50 ms | p99 ms | max ms | replica CPU µs per delivery | replica CPU µs per event | Redis CPU µs per event | Redis commands per event | idle: replica CPU %, Redis CPU %, commands/s | replica CPU µs per delivery, idle included | overview frames | KiB per watched session | CPU % of replicas, Redis, bench processes | µs waited for a CPU per wake-up: replicas, Redis, bench | load before / after | per replica: leases held, p99 ms of its viewers |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ]
  for (const s of scenarios) {
    const e = perEvent(s)
    lines.push(
      `| ${s.sessions} | ${s.replicas} | ${s.viewers} | ${s.upstreamStreams} | ${s.delivered} / ${s.expected} | ${fmt(s.p50Ms)} | ${fmt(s.p99Ms)} | ${fmt(s.maxMs, 0)} | ${fmt(e.replicaCpuUsPerDelivery)} | ${fmt(e.replicaCpuUsPerEvent)} | ${fmt(e.redisCpuUsPerEvent)} | ${fmt(e.redisCommandsPerEvent)} | ${fmt(100 * s.idle.replicaCpuPerS, 1)}, ${fmt(100 * s.idle.redisCpuPerS, 1)}, ${fmt(s.idle.redisCommandsPerS, 0)} | ${fmt(e.replicaCpuUsPerDeliveryTotal)} | ${s.overviewFrames} | ${fmt(s.memKiBPerWatchedSession, 1)} | ${[s.replicaCpuS, s.redisCpuS, s.benchCpuS].map((c) => fmt((100 * c) / s.phaseS, 0)).join(', ')} | ${[s.runQueueWait.replicas, s.runQueueWait.redis, s.runQueueWait.bench].map((w) => fmt(w, 0)).join(', ')} | ${fmt(s.loadBefore)} / ${fmt(s.loadAfter)} | ${s.byReplica.map((r) => `${r.leases}, ${fmt(r.p99Ms)}`).join('; ')} |`,
    )
  }
  lines.push('', '| sessions | target | ratio to the anchor | at most | verdict |', '|---|---|---|---|---|')
  for (const v of verdicts(scenarios)) {
    lines.push(`| ${v.sessions} | ${v.target} | ${fmt(v.ratio)}x | ${v.max}x | ${v.pass ? 'pass' : 'FAIL'} |`)
  }
  return lines
}
