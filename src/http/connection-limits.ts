import { readFileSync } from 'node:fs'

/** Where Linux says a process's limits; the soft limit of open files is the one `accept()` runs into. */
const PROC_LIMITS = '/proc/self/limits'

/**
 * The descriptors the cap leaves for everything that is not a client connection: upstream sockets (a reader
 * per watched session, proxied requests), Redis, files, Node's own. A tenth of the limit, and at least this.
 */
const MIN_RESERVE = 128

/** The cap where the descriptor limit cannot be read (not Linux): a dev machine's, not a production figure. */
const UNKNOWN_LIMIT_CAP = 1024

/**
 * Connections accepted past the cap and answered 503 before node drops the rest unanswered: room for the
 * refusals in flight and for the probes, which are served over the cap (a liveness probe must not fail
 * because viewers filled the replica).
 */
export const REFUSAL_ROOM = 64

/** How many connections a replica takes, decided once at boot. */
export interface ConnectionLimits {
  /** The soft limit of open files when it could be read, else null. */
  readonly descriptors: number | null
  /** Connections served; those past it get 503 `too_many_connections` (probes excepted). */
  readonly cap: number
  /** Connections that have not sent a whole request, at most; past it the one waiting longest is closed. */
  readonly halfOpen: number
  /** `server.maxConnections`: past it node closes a new connection without an answer. */
  readonly hard: number
}

/**
 * The soft limit of open files from `/proc/self/limits` (Node raises its soft limit to the hard one at
 * startup, so this is the limit the process really has), or null: not Linux, or `unlimited`.
 */
export function readDescriptorLimit(text = readProcLimits()): number | null {
  if (text === null) return null
  const line = text.split('\n').find((l) => l.startsWith('Max open files'))
  const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0]
  return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : null
}

function readProcLimits(): string | null {
  try {
    return readFileSync(PROC_LIMITS, 'utf8')
  } catch {
    return null
  }
}

/**
 * The limits from GATEWAY_MAX_CONNECTIONS and GATEWAY_MAX_HALF_OPEN_CONNECTIONS, each derived when unset: the
 * cap from the descriptor limit less a reserve ({@link MIN_RESERVE}, or a tenth), the half-open share a
 * quarter of the cap (never more than the cap).
 */
export function connectionLimits(
  env: {
    GATEWAY_MAX_CONNECTIONS?: number | undefined
    GATEWAY_MAX_HALF_OPEN_CONNECTIONS?: number | undefined
  },
  descriptors: number | null,
): ConnectionLimits {
  const derived =
    descriptors === null
      ? UNKNOWN_LIMIT_CAP
      : Math.max(1, descriptors - Math.max(MIN_RESERVE, Math.ceil(descriptors / 10)))
  const cap = env.GATEWAY_MAX_CONNECTIONS ?? derived
  const halfOpen = Math.min(cap, env.GATEWAY_MAX_HALF_OPEN_CONNECTIONS ?? Math.max(1, Math.floor(cap / 4)))
  return { descriptors, cap, halfOpen, hard: cap + REFUSAL_ROOM }
}
