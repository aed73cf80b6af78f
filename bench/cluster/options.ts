/** The cluster bench's options (pure: test/bench/cluster-bench.test.ts reads them without starting anything). */
import { readFlags } from '../common/orchestrator.ts'

export interface ClusterBenchOptions {
  /** Session counts, one scenario each; the smallest is the anchor the others are compared with. */
  sessions: number[]
  /** Length of each scenario's measured phase. */
  seconds: number
  /** Events per second per session. */
  rate: number
  replicas: number
  /**
   * Simulated runtimes at most (one per session up to this many): sessions' events arrive in this many
   * groups a second, N / runtimes each.
   */
  runtimes: number
  /**
   * Processes the runtimes are spread over (bench/cluster/runtime-pool.ts): an event waits out the pauses of
   * the process that writes it, so one process for thousands of sessions would time the bench, not the gateway.
   */
  runtimeProcesses: number
  /** Viewers per session, spread over the replicas (viewer k of session s on replica (s + k) mod replicas). */
  viewersPerSession: number
  /** Run on a Redis Cluster (3 masters + 3 replicas, test/cluster/redis-cluster-harness.ts) instead of one redis-server. */
  redisCluster: boolean
  /** Wait until the 1-minute load average is below this before measuring... */
  calmLoad: number
  /** ...for at most this many seconds (then measure anyway, the load stated in the results). */
  calmWaitS: number
  /** The results file (default bench/results/cluster-<date>.md). */
  out: string | undefined
  /**
   * Node's own arguments for every replica, before the script (e.g. `--trace-gc`, `--cpu-prof
   * --cpu-prof-dir=/tmp/p`; V8 flags are refused in NODE_OPTIONS): what the replicas spend is looked at in the
   * run that measures them, with no edit of the bench.
   */
  nodeArgs: string[]
}

const FLAGS = [
  '--sessions',
  '--seconds',
  '--rate',
  '--replicas',
  '--viewers-per-session',
  '--runtimes',
  '--runtime-processes',
  '--calm-load',
  '--calm-wait',
  '--out',
  '--node-args',
] as const

/** At most this many sessions in one scenario, and this many scenarios: every loop of the bench is bounded. */
export const MAX_SESSIONS = 5000
const MAX_SCENARIOS = 6

function number(flag: string, given: string | undefined, min: number, max: number): number {
  const value = Number(given)
  if (given === undefined || !Number.isFinite(value) || value < min || value > max)
    throw new Error(`${flag} wants a number from ${min} to ${max}, got ${given ?? 'nothing'}`)
  return value
}

/** Reads `npm run bench -- cluster [options]`; throws naming the option that is wrong. */
export function parseClusterOptions(argv: readonly string[]): ClusterBenchOptions {
  const opts: ClusterBenchOptions = {
    sessions: [50, 500, 2000],
    seconds: 30,
    rate: 1,
    replicas: 3,
    viewersPerSession: 2,
    runtimes: 200,
    runtimeProcesses: 4,
    redisCluster: false,
    calmLoad: 1,
    calmWaitS: 300,
    out: undefined,
    nodeArgs: [],
  }
  const rest = argv.filter((a) => a !== '--redis-cluster')
  opts.redisCluster = rest.length !== argv.length
  for (const [flag, given] of readFlags([...rest], FLAGS, true)) {
    if (flag === '--sessions') {
      const counts = String(given ?? '')
        .split(',')
        .map((s) => number('--sessions', s, 1, MAX_SESSIONS))
      if (counts.length > MAX_SCENARIOS) throw new Error(`--sessions takes at most ${MAX_SCENARIOS} counts`)
      opts.sessions = [...new Set(counts)].sort((a, b) => a - b)
    } else if (flag === '--seconds') opts.seconds = number(flag, given, 1, 300)
    else if (flag === '--rate') opts.rate = number(flag, given, 0.1, 100)
    else if (flag === '--replicas') opts.replicas = number(flag, given, 1, 6)
    else if (flag === '--viewers-per-session') opts.viewersPerSession = number(flag, given, 0, 20)
    else if (flag === '--runtimes') opts.runtimes = number(flag, given, 1, 500)
    else if (flag === '--runtime-processes') opts.runtimeProcesses = number(flag, given, 1, 16)
    else if (flag === '--calm-load') opts.calmLoad = number(flag, given, 0, 64)
    else if (flag === '--calm-wait') opts.calmWaitS = number(flag, given, 0, 3600)
    else if (flag === '--out') {
      if (!given) throw new Error('--out wants a file')
      opts.out = given
    } else if (flag === '--node-args') {
      const args = String(given ?? '')
        .split(' ')
        .filter((a) => a !== '')
      if (!args[0]?.startsWith('--')) throw new Error('--node-args wants Node options, e.g. "--trace-gc"')
      opts.nodeArgs = args
    }
  }
  return opts
}
