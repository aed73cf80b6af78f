import type { FastifyBaseLogger } from 'fastify'
import type { SeenKeys } from '../seen-keys.ts'
import {
  type AdaptiveCard,
  cardInvokeResponse,
  type OutboundActivity,
  type TeamsActivity,
  type TeamsInvokeHandler,
  type TeamsInvokeResponse,
} from './activity.ts'
import type { TeamsConnector } from './connector.ts'
import { installationChange, type TeamsInstallationStore } from './installations.ts'
import type { ActivityOutcome, ActivityType } from './metrics.ts'
import { allowedServiceBase } from './service-url.ts'

/** What the messaging endpoint answers, and what it counts. */
export interface TeamsHandled {
  readonly type: ActivityType
  readonly outcome: ActivityOutcome
  /** The HTTP status; 200 with no body unless {@link body}. */
  readonly status: number
  readonly body?: unknown
  /** Counted already, with what came of it (an invoke the adapter answered counts its own outcome). */
  readonly counted?: true
}

export interface TeamsBotOptions {
  /** `28:<app id>`. */
  readonly botId: string
  readonly connector: TeamsConnector
  readonly installations: TeamsInstallationStore
  /** Activities handled already (Teams retries a delivery it saw no answer to): one reply per activity. */
  readonly seen: SeenKeys
  readonly serviceUrls: readonly string[]
  readonly production: boolean
  readonly log: FastifyBaseLogger
}

/** An activity id is remembered this long: Teams retries within minutes. */
const SEEN_MS = 60 * 60_000

/**
 * What the bot does with an activity whose bearer token, serviceUrl and tenant were checked: records where it
 * is installed (`conversationUpdate`), answers a mention in a channel or group chat with that conversation's
 * notify-file line, hands `adaptiveCard/action` invokes to the Teams adapter's handler, ignores the rest.
 * Replies are posted after the answer (Teams wants one within seconds) and never twice for one activity.
 */
export class TeamsBot {
  readonly #o: TeamsBotOptions
  #invoke: TeamsInvokeHandler | null = null
  readonly #pending = new Set<Promise<void>>()

  constructor(options: TeamsBotOptions) {
    this.#o = options
  }

  /** The handler of `adaptiveCard/action` invokes (until one is set, they get a "not ready" card). */
  setInvokeHandler(handler: TeamsInvokeHandler): void {
    this.#invoke = handler
  }

  async handle(activity: TeamsActivity): Promise<TeamsHandled> {
    switch (activity.type) {
      case 'conversationUpdate':
        return this.#conversationUpdate(activity)
      case 'message':
        return this.#message(activity)
      case 'invoke':
        return this.#invokeActivity(activity)
      default:
        return { type: 'other', outcome: 'ignored', status: 200 }
    }
  }

  /** Waits for the replies still being posted (at shutdown). */
  async close(): Promise<void> {
    await Promise.allSettled([...this.#pending])
  }

  async #conversationUpdate(activity: TeamsActivity): Promise<TeamsHandled> {
    const type = 'conversationUpdate'
    const change = installationChange(activity, this.#o.botId, new Date())
    if (change === null) return { type, outcome: 'ignored', status: 200 }
    if (change.kind === 'remove') {
      await this.#o.installations.remove(change.conversationId, change.teamId)
      this.#o.log.info({ conversation: change.conversationId }, 'teams: bot removed from a conversation')
      return { type, outcome: 'accepted', status: 200 }
    }
    const i = change.installation
    await this.#o.installations.put(i)
    this.#o.log.info({ conversation: i.conversationId, team: i.teamName }, 'teams: installation recorded')
    // Installed in a team or chat (not a channel created later): say where the bot is, once.
    if (activity.membersAdded?.some((m) => m.id === this.#o.botId))
      this.#later(activity, () => this.#replyWithId(activity, i.conversationId, 'installed'))
    return { type, outcome: 'accepted', status: 200 }
  }

  async #message(activity: TeamsActivity): Promise<TeamsHandled> {
    const type = 'message'
    const conversationType = activity.conversation.conversationType
    const mentioned = activity.entities?.some(
      (e) =>
        e.type === 'mention' &&
        (e.mentioned?.id === this.#o.botId || e.mentioned?.id === activity.recipient?.id),
    )
    if (!mentioned || (conversationType !== 'channel' && conversationType !== 'groupChat'))
      return { type, outcome: 'ignored', status: 200 }
    // A channel message's conversation is its thread (`19:…;messageid=…`): the channel is the part before.
    const conversationId =
      (conversationType === 'channel' ? activity.channelData?.channel?.id : undefined) ??
      activity.conversation.id.split(';')[0] ??
      activity.conversation.id
    this.#later(activity, () => this.#replyWithId(activity, conversationId, 'mentioned'))
    return { type, outcome: 'accepted', status: 200 }
  }

  async #invokeActivity(activity: TeamsActivity): Promise<TeamsHandled> {
    const type = 'invoke'
    if (activity.name !== 'adaptiveCard/action') return { type, outcome: 'ignored', status: 501 }
    const handler = this.#invoke
    const answer: TeamsInvokeResponse =
      handler === null ? cardInvokeResponse(notReadyCard()) : await handler(activity)
    return {
      type,
      outcome: handler === null ? 'ignored' : 'accepted',
      status: answer.status,
      body: answer.body,
      ...(handler === null ? {} : { counted: true as const }),
    }
  }

  /** Runs `reply` after the answer, once per activity id (across replicas); failures are logged. */
  #later(activity: TeamsActivity, reply: () => Promise<void>): void {
    const run = (async () => {
      if (activity.id !== undefined && !(await this.#o.seen.first(`msteams:${activity.id}`, SEEN_MS))) return
      await reply()
    })().catch((err: unknown) => {
      const e = err as { code?: unknown; message?: unknown }
      this.#o.log.warn({ code: e?.code, err: e?.message }, 'teams: reply not posted')
    })
    this.#pending.add(run)
    void run.finally(() => this.#pending.delete(run))
  }

  /** Replies in the conversation with the line that sends this conversation the gateway's questions. */
  async #replyWithId(
    activity: TeamsActivity,
    conversationId: string,
    why: 'installed' | 'mentioned',
  ): Promise<void> {
    const allowed = allowedServiceBase(activity.serviceUrl, this.#o.serviceUrls, this.#o.production) !== null
    if (!allowed) {
      // Nothing can be posted there: the administrator finds the conversation in the admin list instead.
      this.#o.log.warn(
        { conversation: conversationId },
        'teams: this conversation’s serviceUrl is not within GATEWAY_TEAMS_SERVICE_URLS; not answering',
      )
      return
    }
    const reply: OutboundActivity = {
      type: 'message',
      textFormat: 'plain',
      text: idReplyText(conversationId, activity.serviceUrl, why),
      ...(activity.id === undefined || why === 'installed' ? {} : { replyToId: activity.id }),
    }
    // A reply to a channel message goes into its thread (the activity's own conversation id carries it).
    await this.#o.connector.post(activity.serviceUrl, activity.conversation.id, reply)
  }
}

/**
 * The bot's answer to a mention (or its installation): the notify-file entry for this conversation, ready to
 * paste. Both values come from Microsoft (a signed activity); they are quoted as JSON strings, which YAML reads.
 */
export function idReplyText(
  conversationId: string,
  serviceUrl: string,
  why: 'installed' | 'mentioned',
): string {
  const entry = notifyEntry(conversationId, serviceUrl)
  const lead =
    why === 'installed'
      ? 'Kasm Runtime Gateway is installed here. To have a team’s questions posted in this conversation, add this entry under the team in the gateway’s notify file (GATEWAY_NOTIFY_FILE):'
      : 'To have a team’s questions posted in this conversation, add this entry under the team in the gateway’s notify file (GATEWAY_NOTIFY_FILE):'
  return `${lead}\n\n${entry}`
}

/** The notify-file entry (a YAML list item) that sends a team's questions to this conversation. */
export function notifyEntry(conversationId: string, serviceUrl: string): string {
  return `- msteams: { conversation: ${JSON.stringify(conversationId)}, serviceUrl: ${JSON.stringify(serviceUrl)} }`
}

/** The answer to a card action while the gateway has no Teams adapter to answer it. */
function notReadyCard(): AdaptiveCard {
  return {
    type: 'AdaptiveCard',
    $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
    version: '1.5',
    body: [
      {
        type: 'TextBlock',
        text: 'This gateway cannot take answers from Teams yet. Answer in the console.',
        wrap: true,
      },
    ],
  }
}
