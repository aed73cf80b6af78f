import type { ChatJob } from '../chat/outbox.ts'
import { notificationFocus, type SessionFocus } from '../console/links.ts'
import type { ChatLinkRecord } from '../identity/chat-link-store.ts'
import { deliveryId, type Notification } from '../notify/notification.ts'
import type { OutboxJob } from '../notify/outbox.ts'
import { chatTargetsFor, type NotifyRoutes, targetsFor } from '../notify/targets.ts'
import { pagerAction } from './pagerduty.ts'
import type { StepTarget } from './state.ts'

/** What {@link Fanout} hands deliveries to. */
export interface FanoutOptions {
  readonly routes: () => NotifyRoutes
  /** The webhook outbox (pagers included). */
  readonly send: (job: OutboxJob) => void
  /** The chat outbox; absent without a chat adapter (then people are skipped: no linked account). */
  readonly sendChat?: (job: ChatJob) => void
  /** A person's linked chat accounts; null without a chat adapter. */
  readonly links: { listOf(sub: string): Promise<ChatLinkRecord[]> } | null
  readonly link: (kasmId: string, focus: SessionFocus | null) => string
}

/** The label of a person's target (`person:<sub>`), and the sub of one. */
export const personLabel = (sub: string): string => `person:${sub}`
const subOf = (label: string): string => label.slice('person:'.length)

/**
 * Hands one notification to targets named by label (as a plan keeps them), each a delivery of its own in the
 * ledger (key: the notification's key and the delivery's label), so a step re-sent by a new reader is never
 * sent twice. A label no longer in the routes (a reload removed it) is skipped, `target_removed`.
 */
export class Fanout {
  readonly #o: FanoutOptions

  constructor(options: FanoutOptions) {
    this.#o = options
  }

  /**
   * Sends `n` to each target, found by label in `routes` (the routes when the question was first seen, so a
   * reload that renumbers a team's targets does not redirect an open question's steps; default: now).
   */
  async send(
    n: Notification,
    targets: readonly Pick<StepTarget, 'kind' | 'label'>[],
    routes: NotifyRoutes = this.#o.routes(),
  ): Promise<StepTarget[]> {
    const url = this.#o.link(n.kasmId, notificationFocus(n))
    const out: StepTarget[] = []
    for (const t of targets) {
      const sent = (): StepTarget => ({ kind: t.kind, label: t.label, outcome: 'sent' })
      const skipped = (reason: string): StepTarget => ({ ...sent(), outcome: 'skipped', reason })
      if (t.kind === 'person') {
        out.push((await this.#person(n, subOf(t.label), url, routes)) ? sent() : skipped('no_linked_account'))
        continue
      }
      if (t.kind === 'webhook' || t.kind === 'pagerduty') {
        const target = targetsFor(routes, n.team).find((x) => x.label === t.label)
        if (target === undefined) {
          out.push(skipped('target_removed'))
          continue
        }
        // A pager gets its own events only (trigger, acknowledge, resolve); a reminder is not one.
        if (target.format !== 'pagerduty' || pagerAction(n) !== null)
          this.#o.send(jobOf(n, t.label, target, url))
        out.push(sent())
        continue
      }
      const target = chatTargetsFor(routes, n.team).find((x) => x.label === t.label)
      if (target === undefined || this.#o.sendChat === undefined) {
        out.push(skipped('target_removed'))
        continue
      }
      this.#o.sendChat(jobOf(n, t.label, target, url))
      out.push(sent())
    }
    return out
  }

  /**
   * A direct message to a person through each of their active linked accounts: Slack's DM, Teams' 1:1 chat
   * with the bot (made when delivered, on the service URL of the team's Teams channel when the notify file
   * names one). False when they have none, or no chat adapter sends.
   */
  async #person(n: Notification, sub: string, url: string, routes: NotifyRoutes): Promise<boolean> {
    const sendChat = this.#o.sendChat
    if (sendChat === undefined || this.#o.links === null) return false
    const now = Date.now()
    const accounts = (await this.#o.links.listOf(sub)).filter(
      (r) => r.state === 'active' && r.expiresAt > now,
    )
    let sent = false
    const slack = accounts.find((r) => r.chat === 'slack')
    if (slack !== undefined) {
      const label = `${personLabel(sub)}/slack`
      sendChat(jobOf(n, label, { chat: 'slack' as const, channel: slack.user, label }, url))
      sent = true
    }
    const teams = accounts.find((r) => r.chat === 'msteams')
    if (teams !== undefined) {
      const label = `${personLabel(sub)}/msteams`
      const channel = chatTargetsFor(routes, n.team).find((t) => t.chat === 'msteams')
      const target = {
        chat: 'msteams' as const,
        conversation: '',
        serviceUrl: channel?.chat === 'msteams' ? channel.serviceUrl : '',
        label,
        person: { tenantId: teams.workspace, user: teams.user },
      }
      sendChat(jobOf(n, label, target, url))
      sent = true
    }
    return sent
  }
}

/**
 * A delivery of a notification to one target: its ledger key (the notification's key and the target's label,
 * as the watcher's deliveries have always been keyed) and its delivery id.
 */
function jobOf<T>(n: Notification, label: string, target: T, url: string) {
  return { key: `${n.key}\u0000${label}`, delivery: deliveryId(n, label), notification: n, target, url }
}
