import { byFiling, filedAt, type ReportRecord, type ReportStore } from './types.ts'

/** Records kept in memory over every team; the oldest go first beyond it. */
const MAX_RECORDS = 100_000
/** Claims kept; the oldest go first beyond it (a question closed that long ago is long history). */
const MAX_CLAIMS = 400_000

/** The report's records of this process (embedded mode): lost on a restart, like its metrics. */
export class MemoryReportStore implements ReportStore {
  readonly #retentionMs: number
  /** Per team, in filing order (records arrive nearly in order; each is put in its place). */
  readonly #byTeam = new Map<string, ReportRecord[]>()
  /** `team \0 key` → when the claim expires (ms), in insertion order. */
  readonly #claims = new Map<string, number>()
  #count = 0

  constructor(retentionMs: number) {
    this.#retentionMs = retentionMs
  }

  async add(record: ReportRecord): Promise<boolean> {
    if (!this.#claim(record.team, record.id)) return false
    let records = this.#byTeam.get(record.team)
    if (records === undefined) {
      records = []
      this.#byTeam.set(record.team, records)
    }
    let at = records.length
    const filed = filedAt(record)
    while (at > 0 && filedAt(records[at - 1] as ReportRecord) > filed) at--
    records.splice(at, 0, record)
    this.#count++
    this.#trim()
    return true
  }

  async list(teams: readonly string[] | null, since: number): Promise<ReportRecord[]> {
    this.#trim()
    const from = new Date(since).toISOString()
    const out: ReportRecord[] = []
    for (const team of teams ?? [...this.#byTeam.keys()]) {
      for (const record of this.#byTeam.get(team) ?? []) if (filedAt(record) >= from) out.push(record)
    }
    return out.sort(byFiling)
  }

  async teams(): Promise<string[]> {
    this.#trim()
    return [...this.#byTeam.keys()]
  }

  #claim(team: string, key: string): boolean {
    const id = `${team}\u0000${key}`
    const now = Date.now()
    const expires = this.#claims.get(id)
    if (expires !== undefined && expires > now) return false
    this.#claims.delete(id)
    this.#claims.set(id, now + this.#retentionMs)
    while (this.#claims.size > MAX_CLAIMS) {
      const oldest = this.#claims.keys().next().value
      if (oldest === undefined) break
      this.#claims.delete(oldest)
    }
    return true
  }

  /** Drops what is past the retention, and the oldest records beyond the bound. */
  #trim(): void {
    const cutoff = new Date(Date.now() - this.#retentionMs).toISOString()
    for (const [team, records] of this.#byTeam) {
      let old = 0
      while (old < records.length && filedAt(records[old] as ReportRecord) < cutoff) old++
      if (old > 0) {
        records.splice(0, old)
        this.#count -= old
      }
      if (records.length === 0) this.#byTeam.delete(team)
    }
    while (this.#count > MAX_RECORDS) {
      let oldestTeam: string | null = null
      let oldest = ''
      for (const [team, records] of this.#byTeam) {
        const first = records[0]
        if (first !== undefined && (oldestTeam === null || filedAt(first) < oldest)) {
          oldestTeam = team
          oldest = filedAt(first)
        }
      }
      if (oldestTeam === null) break
      const records = this.#byTeam.get(oldestTeam) as ReportRecord[]
      records.shift()
      this.#count--
      if (records.length === 0) this.#byTeam.delete(oldestTeam)
    }
  }
}
