import { createHash } from 'node:crypto'
import type { Transition } from '../summary/types.ts'

/**
 * What a notification says happened (the `type` of the body and the `X-Krg-Event` header): a summary
 * transition, or a person taking a question ("I'm on it") and the question being free again.
 */
export type NotificationType = Transition['type'] | 'request.claimed' | 'request.unclaimed'

/** Who holds a question: a person's id and name, and since when (ISO 8601). Never a credential. */
export interface ClaimNotice {
  readonly sub: string
  readonly name: string
  readonly at: string
}

/**
 * One thing a person may need to act on, built from a summary {@link Transition}: ids, titles, reasons and
 * verdicts only, never message text, field values or tokens.
 */
export interface Notification {
  /** Identifies the event for exactly-once delivery: session, run, event seq, type, item, reminder. */
  readonly key: string
  readonly type: NotificationType
  readonly kasmId: string
  readonly team: string
  readonly run: string
  readonly seq: number
  readonly reminder: boolean
  readonly request?: {
    readonly request_id: string
    readonly title: string
    readonly deadline: string | null
    readonly field_ids: readonly string[]
    readonly closed_by?: string
  }
  readonly escalation?: { readonly reason: string; readonly ended_by?: string }
  /**
   * The escalation step this notification belongs to (`request.opened` and `escalation.started`): 0 for the
   * targets without `after_s`, N for the N-th later `after_s` of the team's list (src/escalation).
   */
  readonly step?: number
  /** `request.claimed`: who took the question. */
  readonly claim?: ClaimNotice
  /** `request.unclaimed`: who held it and why it is free again (given back, or lapsed without an answer). */
  readonly unclaimed?: { readonly holder: ClaimNotice; readonly reason: 'released' | 'lapsed' }
  readonly verdict?: string | null
  readonly outcome?: string | null
}

/** A run end worth a person's time: the tests could not run, or the agent handed the run over. */
function runEndNeedsPerson(verdict: string | null, outcome: string | null): boolean {
  return verdict === 'test-error' || outcome === 'escalated'
}

/** The notification of a transition for a session of `team`; null when it is not one (an ordinary run end). */
export function notificationOf(
  kasmId: string,
  team: string,
  t: Transition,
  options: { reminder?: boolean } = {},
): Notification | null {
  const reminder = options.reminder === true
  const base = { type: t.type, kasmId, team, run: t.run, seq: t.seq, reminder }
  const keyOf = (item: string): string =>
    [kasmId, t.run, String(t.seq), t.type, item, reminder ? 'reminder' : ''].join('\u0000')
  switch (t.type) {
    case 'request.opened':
    case 'request.closed': {
      const r = t.request
      return {
        ...base,
        key: keyOf(r.requestId),
        request: {
          request_id: r.requestId,
          title: r.title,
          deadline: r.deadline,
          field_ids: r.fieldIds,
          ...(t.type === 'request.closed' ? { closed_by: t.closedBy } : {}),
        },
      }
    }
    case 'escalation.started':
      return { ...base, key: keyOf(''), escalation: { reason: t.reason } }
    case 'escalation.ended':
      return { ...base, key: keyOf(''), escalation: { reason: t.reason, ended_by: t.endedBy } }
    case 'run.ended':
      if (!runEndNeedsPerson(t.verdict, t.outcome)) return null
      return { ...base, key: keyOf(''), verdict: t.verdict, outcome: t.outcome }
  }
}

/**
 * The `delivery` id of a notification to one target: the same on every retry and on every replica (a new owner
 * resuming a delivery sends the same id), and receivers may dedupe by it.
 */
export function deliveryId(notification: Notification, targetLabel: string): string {
  return createHash('sha256')
    .update(`${notification.key}\u0000${targetLabel}`)
    .digest('base64url')
    .slice(0, 32)
}
