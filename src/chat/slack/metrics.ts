import { Counter, Gauge, type Registry } from 'prom-client'

/** What a person did in Slack (the `type` label). */
export type InteractionType =
  /** A choice button of a single-choice question. */
  | 'button'
  /** "Answer…": the modal opened (or why not). */
  | 'modal_open'
  /** The modal submitted. */
  | 'modal_submit'
  /** "I'm on it" or "Give it back" (outcome `taken`, `given_back`, `held`, `closed`, or a denial). */
  | 'claim'
  /** "Open in console", "Connect your Slack account": links, nothing to do. */
  | 'link'
  /** "This is not me" on the code that links a Slack account. */
  | 'not_me'
  /** Anything else the app receives (a closed modal, a shortcut): acknowledged and ignored. */
  | 'other'
  /** A request to the Request URL that is not Slack's: refused before it was read. */
  | 'unverified'

/** The Slack app's metrics. */
export interface SlackMetrics {
  /** `krg_slack_interactions_total{type,outcome}`: the outcome is an answer's (AnswerOutcome), a denial, or a refusal. */
  readonly interactions: Counter<'type' | 'outcome'>
  /** `krg_slack_socket_connected`: 1 while this replica's Socket Mode connection is open. */
  readonly socketConnected: Gauge
}

/** Registers the Slack metrics, with the series an alert needs at 0 from the first scrape. */
export function createSlackMetrics(registry: Registry): SlackMetrics {
  const interactions = new Counter({
    name: 'krg_slack_interactions_total',
    help: 'Slack interactions by what the person did (type) and what came of it (outcome)',
    labelNames: ['type', 'outcome'],
    registers: [registry],
  })
  for (const type of ['button', 'modal_submit'])
    for (const outcome of ['answered', 'invalid', 'taken', 'closed', 'unlinked', 'viewer', 'failed'])
      interactions.inc({ type, outcome }, 0)
  for (const outcome of ['bad_signature', 'stale', 'replayed', 'rate_limited'])
    interactions.inc({ type: 'unverified', outcome }, 0)
  const socketConnected = new Gauge({
    name: 'krg_slack_socket_connected',
    help: "1 while this replica's Slack Socket Mode connection is open (0 without Socket Mode)",
    registers: [registry],
  })
  return { interactions, socketConnected }
}
