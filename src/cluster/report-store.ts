import { createHash } from 'node:crypto'
import type { ChainableCommander } from 'ioredis'
import { byFiling, filedAt, type ReportRecord, type ReportStore } from '../report/types.ts'
import { pipelined } from './client.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'

/** Records kept per team whatever the retention says (the oldest go first beyond it). */
const MAX_PER_TEAM = 200_000

/**
 * KEYS: the claim, the team's sorted set. ARGV: the retention (ms), the record's score (ms), the record (JSON),
 * the oldest score kept, the most records kept. Claims the record's key (`SET NX PX`) and, only when this call
 * claimed it, adds the record and trims the set to the retention and the bound: so a record is written once
 * whichever replica writes first, and never again by a replica taking the session over.
 */
const add = `
if not redis.call('SET', KEYS[1], '1', 'PX', ARGV[1], 'NX') then return 0 end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[5])
if over > 0 then redis.call('ZREMRANGEBYRANK', KEYS[2], 0, over - 1) end
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1
`

interface AddCommand {
  krgReportAdd(
    claim: string,
    set: string,
    ttl: number,
    score: number,
    record: string,
    cutoff: number,
    max: number,
  ): Promise<number>
}

/**
 * The cluster's {@link ReportStore}: a sorted set of JSON records per team scored by filing time, and a
 * claim key per record that lives as long as the retention, so the first replica
 * to write wins and no later one (a takeover, a restarted replica) writes or counts it again.
 */
export class RedisReportStore implements ReportStore {
  readonly #command: RedisClient & AddCommand
  readonly #keys: ClusterKeys
  readonly #retentionMs: number

  constructor(command: RedisClient, keys: ClusterKeys, retentionMs: number) {
    const c = command as RedisClient & Partial<AddCommand>
    if (!c.krgReportAdd) c.defineCommand('krgReportAdd', { numberOfKeys: 2, lua: add })
    this.#command = c as RedisClient & AddCommand
    this.#keys = keys
    this.#retentionMs = retentionMs
  }

  #claimKey(team: string, key: string): string {
    return this.#keys.reportClaim(team, createHash('sha256').update(key).digest('hex').slice(0, 32))
  }

  async add(record: ReportRecord): Promise<boolean> {
    const now = Date.now()
    const added = await this.#command.krgReportAdd(
      this.#claimKey(record.team, record.id),
      this.#keys.report(record.team),
      this.#retentionMs,
      Date.parse(filedAt(record)),
      JSON.stringify(record),
      now - this.#retentionMs,
      MAX_PER_TEAM,
    )
    if (added !== 1) return false
    // Another slot than the team's keys (a script may only touch one), so a separate, idempotent call: the
    // index of teams is one key, so this MULTI is one slot on a Redis Cluster too.
    await this.#command
      .multi()
      .zadd(this.#keys.reportTeams, now, record.team)
      .zremrangebyscore(this.#keys.reportTeams, '-inf', `(${now - this.#retentionMs}`)
      .exec()
    return true
  }

  async list(teams: readonly string[] | null, since: number): Promise<ReportRecord[]> {
    const names = teams ?? (await this.teams())
    if (names.length === 0) return []
    // One slot per team on a Redis Cluster.
    const replies = await pipelined(
      this.#command,
      names.map((team) => (p: ChainableCommander) => p.zrangebyscore(this.#keys.report(team), since, '+inf')),
    )
    const out: ReportRecord[] = []
    for (const [err, members] of replies) {
      if (err) throw err
      for (const raw of members as string[]) {
        const record = parseRecord(raw)
        if (record !== null) out.push(record)
      }
    }
    return out.sort(byFiling)
  }

  async teams(): Promise<string[]> {
    return this.#command.zrangebyscore(this.#keys.reportTeams, Date.now() - this.#retentionMs, '+inf')
  }
}

function parseRecord(raw: string): ReportRecord | null {
  try {
    const value: unknown = JSON.parse(raw)
    return typeof value === 'object' && value !== null && 'kind' in value ? (value as ReportRecord) : null
  } catch {
    return null
  }
}
