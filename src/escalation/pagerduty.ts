import { createHash } from 'node:crypto'
import type { Notification } from '../notify/notification.ts'

/** What an Events API v2 receiver is told: page, someone took it, it is over. */
export type PagerAction = 'trigger' | 'acknowledge' | 'resolve'

/**
 * The pager event of a notification; null when a pager gets none: a reminder (the pager's own escalation
 * policy re-notifies), a run's end (nothing to take). A claim given back or lapsed triggers again (Events v2
 * has no "unacknowledge": PagerDuty appends it to the open alert, other receivers may re-open it).
 */
export function pagerAction(n: Notification): PagerAction | null {
  if (n.reminder) return null
  switch (n.type) {
    case 'request.opened':
    case 'escalation.started':
    case 'request.unclaimed':
      return 'trigger'
    case 'request.claimed':
      return 'acknowledge'
    case 'request.closed':
    case 'escalation.ended':
      return 'resolve'
    default:
      return null
  }
}

/**
 * The incident's `dedup_key`: the same for a question's trigger, acknowledge and resolve, on every replica; a
 * hash of the session, run and question (a handoff: `escalation`), so it names no id a receiver could use.
 */
export function dedupKey(n: Notification): string {
  const item = n.request?.request_id ?? 'escalation'
  const hash = createHash('sha256').update(`${n.kasmId}\u0000${n.run}\u0000${item}`).digest('base64url')
  return `krg-${hash.slice(0, 32)}`
}

/** Events v2 caps `summary` at 1024 characters. */
const MAX_SUMMARY = 1024

function summaryOf(n: Notification): string {
  const where = `session ${n.kasmId} (team ${n.team})`
  const text =
    n.type === 'escalation.started'
      ? `Handoff waiting in ${where}: ${n.escalation?.reason ?? ''}`
      : `Question waiting in ${where}: ${n.request?.title ?? ''}`
  return text.length > MAX_SUMMARY ? `${text.slice(0, MAX_SUMMARY - 1)}…` : text
}

/**
 * The Events API v2 body of a notification to a pager with `routingKey`; null when it gets none
 * ({@link pagerAction}). A trigger carries a summary (the question's title or the handoff's reason: never a
 * field value or a token), `severity: error`, ids in `custom_details` and the console link; acknowledge and
 * resolve carry the key alone.
 */
export function pagerBody(
  n: Notification,
  routingKey: string,
  url: string,
  at: string,
): Record<string, unknown> | null {
  const action = pagerAction(n)
  if (action === null) return null
  const base = { routing_key: routingKey, event_action: action, dedup_key: dedupKey(n) }
  if (action !== 'trigger') return base
  const absolute = /^https?:\/\//.test(url)
  return {
    ...base,
    payload: {
      summary: summaryOf(n),
      source: `kasm-runtime-gateway/${n.kasmId}`,
      severity: 'error',
      timestamp: at,
      component: n.kasmId,
      group: n.team,
      class: n.request === undefined ? 'handoff' : 'question',
      custom_details: {
        type: n.type,
        kasmId: n.kasmId,
        team: n.team,
        run: n.run,
        ...(n.request === undefined
          ? {}
          : { request_id: n.request.request_id, deadline: n.request.deadline }),
        ...(n.step === undefined ? {} : { step: n.step }),
        ...(n.unclaimed === undefined ? {} : { unclaimed: n.unclaimed.reason }),
        url,
      },
    },
    client: 'kasm-runtime-gateway',
    ...(absolute ? { client_url: url, links: [{ href: url, text: 'Open in the console' }] } : {}),
  }
}
