import { Counter, type Registry } from 'prom-client'

/** An activity's `type` label: Teams' activity types the bot reads, anything else, or one refused unread. */
export type ActivityType = 'message' | 'conversationUpdate' | 'invoke' | 'other' | 'unverified'

/**
 * What came of an activity (the `outcome` label): `accepted` (acted on), `ignored` (checked, nothing to do),
 * `invalid` (signed but unreadable), `unauthorized` (refused: the bearer or the activity failed a check, 401),
 * `rate_limited` (the same, from an address past its limit of such refusals, 429),
 * `unavailable` (the signing keys could not be read, 503), `failed` (acting on it failed). An invoke the Teams
 * adapter answers is counted with its own outcome instead of `accepted` (chat/msteams/invoke.ts: `answered`,
 * `repeated`, `taken`, `given_back`, `held`, `closed`, `viewer`, `unlinked`, `invalid`, …).
 */
export type ActivityOutcome =
  | 'accepted'
  | 'ignored'
  | 'invalid'
  | 'unauthorized'
  | 'rate_limited'
  | 'unavailable'
  | 'failed'

/** The Teams bot's metrics. */
export interface TeamsMetrics {
  /** `krg_msteams_activities_total{type,outcome}`. */
  readonly activities: Counter<'type' | 'outcome'>
}

/** Registers the Teams metrics, with the series an alert needs at 0 from the first scrape. */
export function createTeamsMetrics(registry: Registry): TeamsMetrics {
  const activities = new Counter({
    name: 'krg_msteams_activities_total',
    help: 'Activities the Teams bot received, by type and what came of them (outcome)',
    labelNames: ['type', 'outcome'],
    registers: [registry],
  })
  for (const type of ['message', 'conversationUpdate', 'invoke'])
    for (const outcome of ['accepted', 'ignored', 'failed']) activities.inc({ type, outcome }, 0)
  for (const outcome of ['unauthorized', 'rate_limited', 'unavailable'])
    activities.inc({ type: 'unverified', outcome }, 0)
  activities.inc({ type: 'other', outcome: 'invalid' }, 0)
  return { activities }
}
