import { pagerBody } from '../escalation/pagerduty.ts'
import type { Notification } from './notification.ts'
import type { NotifyFormat } from './targets.ts'

/** What a body is rendered from: the notification, its delivery id and the console link of its session. */
export interface Rendering {
  readonly notification: Notification
  readonly delivery: string
  /**
   * ISO 8601: when the delivery was first recorded; a new owner resuming it keeps it, so every attempt by
   * every replica sends the same body bytes (each signs them with its own timestamp).
   */
  readonly at: string
  /** The console's session view (absolute with GATEWAY_PUBLIC_ORIGIN, else a path). */
  readonly url: string
  /** `pagerduty`: the target's routing key (it goes in the body). */
  readonly routingKey?: string
}

/**
 * The raw body a target gets (the signature covers its timestamp and exactly these bytes); null when the
 * target gets nothing of this notification (a pager and a reminder: src/escalation/pagerduty.ts).
 */
export function renderBody(format: NotifyFormat, rendering: Rendering): string | null {
  if (format === 'pagerduty') {
    const { notification, routingKey, url, at } = rendering
    const body = pagerBody(notification, routingKey ?? '', url, at)
    return body === null ? null : JSON.stringify(body)
  }
  return JSON.stringify(format === 'slack' ? slackBody(rendering) : jsonBody(rendering))
}

/** Our own body: `{type, delivery, at, kasmId, team, run, request?, escalation?, verdict?, outcome?, url}`. */
function jsonBody({ notification: n, delivery, url, at }: Rendering): Record<string, unknown> {
  return {
    type: n.type,
    delivery,
    at,
    kasmId: n.kasmId,
    team: n.team,
    run: n.run,
    ...(n.reminder ? { reminder: true } : {}),
    ...(n.request === undefined ? {} : { request: n.request }),
    ...(n.escalation === undefined ? {} : { escalation: n.escalation }),
    ...(n.step === undefined ? {} : { step: n.step }),
    ...(n.claim === undefined ? {} : { claim: n.claim }),
    ...(n.unclaimed === undefined ? {} : { unclaimed: n.unclaimed }),
    ...(n.verdict === undefined ? {} : { verdict: n.verdict }),
    ...(n.outcome === undefined ? {} : { outcome: n.outcome }),
    url,
  }
}

/** Slack's mrkdwn control characters, escaped as Slack documents (`&`, `<`, `>`). */
function esc(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')
}

/** `12:03 UTC`, or the date too when it is not today. */
function when(iso: string): string {
  const d = new Date(iso)
  const time = `${d.toISOString().slice(11, 16)} UTC`
  return d.toDateString() === new Date().toDateString() ? time : `${d.toISOString().slice(0, 10)} ${time}`
}

/** One line saying what happened, in mrkdwn. */
function line(n: Notification, session: string): string {
  const r = n.request
  switch (n.type) {
    case 'request.opened': {
      const by = r?.deadline ? `, answer by ${when(r.deadline)}` : ''
      const lead = n.reminder ? '*Reminder:* a question is still open' : '*A question is waiting*'
      return `${lead} in ${session}: “${esc(r?.title ?? '')}”${by}`
    }
    case 'request.closed':
      return `Question closed (${esc(r?.closed_by ?? 'closed')}) in ${session}: “${esc(r?.title ?? '')}”`
    case 'request.claimed':
      return `${esc(n.claim?.name ?? 'Someone')} is on the question in ${session}: “${esc(r?.title ?? '')}”`
    case 'request.unclaimed': {
      const why = n.unclaimed?.reason === 'lapsed' ? 'lapsed without an answer' : 'was given back'
      return `${esc(n.unclaimed?.holder.name ?? 'A')}'s claim ${why}; the question is open again in ${session}: “${esc(r?.title ?? '')}”`
    }
    case 'escalation.started':
      return `*Handoff:* the agent in ${session} asks a person to take over: ${esc(n.escalation?.reason ?? '')}`
    case 'escalation.ended':
      return `Handoff ended (${esc(n.escalation?.ended_by ?? 'ended')}) in ${session}`
    case 'run.ended':
      return `*Run ended* in ${session}: verdict ${esc(n.verdict ?? 'none')}, outcome ${esc(n.outcome ?? 'none')}`
  }
}

/**
 * A body Slack-compatible incoming webhooks accept: `text` (the notification's fallback and what simple
 * receivers show) and `blocks` (a section, and a button to the session when the link is absolute).
 */
function slackBody({ notification: n, url }: Rendering): Record<string, unknown> {
  const absolute = /^https?:\/\//.test(url)
  const name = `session ${esc(n.kasmId)} (team ${esc(n.team)})`
  const session = absolute ? `<${url}|${name}>` : name
  const text = line(n, session)
  const blocks: Record<string, unknown>[] = [{ type: 'section', text: { type: 'mrkdwn', text } }]
  if (absolute)
    blocks.push({
      type: 'actions',
      elements: [{ type: 'button', text: { type: 'plain_text', text: 'Open the session' }, url }],
    })
  return { text, blocks }
}
