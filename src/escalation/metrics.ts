import { Counter, type Registry } from 'prom-client'
import type { TargetKind } from './state.ts'

/** How a claim ended: the question answered or closed while held, the claim lapsed or was given back. */
export type ClaimOutcome = 'answered' | 'closed' | 'lapsed' | 'released'

/** The escalation counters (bounded labels: teams, target kinds, a few outcomes and reasons). */
export interface EscalationMetrics {
  /** One per target of a step that went out: `sent` (handed to its outbox) or `skipped` with a reason. */
  readonly steps: Counter<'team' | 'kind' | 'outcome' | 'reason'>
  readonly claims: Counter<'team' | 'outcome'>
}

/** Registers `krg_escalation_steps_total` and `krg_claims_total`. */
export function createEscalationMetrics(registry: Registry): EscalationMetrics {
  return {
    steps: new Counter({
      name: 'krg_escalation_steps_total',
      help: 'Targets of escalation steps that went out, by team, target kind (webhook, slack, msteams, person, pagerduty) and outcome (sent, skipped; reason: no_linked_account, target_removed)',
      labelNames: ['team', 'kind', 'outcome', 'reason'],
      registers: [registry],
    }),
    claims: new Counter({
      name: 'krg_claims_total',
      help: '"I\'m on it" claims on questions by how they ended: answered, closed (otherwise, e.g. timed out), lapsed (GATEWAY_CLAIM_TTL_S), released',
      labelNames: ['team', 'outcome'],
      registers: [registry],
    }),
  }
}

/** The kinds of target, for documentation and series. */
export const TARGET_KINDS: readonly TargetKind[] = ['webhook', 'slack', 'msteams', 'person', 'pagerduty']
