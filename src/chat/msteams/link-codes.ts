import type { FastifyBaseLogger } from 'fastify'
import type { AuditStreams } from '../../audit/streams.ts'
import type { ChatAccount } from '../../identity/chat-link-store.ts'
import type { ChatLinkFlow, LinkCode } from '../../identity/link-flow.ts'
import { declineLinkCode, personName } from '../link-decline.ts'
import { TeamsApiError } from './api-error.ts'
import { type AdaptiveCard, linkCodeCard, linkDeclinedCard, noticeCard } from './cards.ts'
import type { TeamsConnector } from './connector.ts'
import { cardActivity } from './messages.ts'

/** What {@link TeamsLinkCodes} works with. */
export interface TeamsLinkCodesOptions {
  readonly connector: TeamsConnector
  readonly flow: ChatLinkFlow
  readonly audit: AuditStreams
  readonly log: FastifyBaseLogger
}

/** How the bot reaches a Teams user with a code: their member id (`29:…`) and the service URL they came from. */
export interface TeamsReach {
  readonly id: string
  readonly serviceUrl: string
}

/** The link token's `reach` of a Teams user. */
export function encodeReach(reach: TeamsReach): string {
  return JSON.stringify({ id: reach.id, s: reach.serviceUrl })
}

function decodeReach(raw: string | undefined): TeamsReach | null {
  if (raw === undefined) return null
  try {
    const { id, s } = JSON.parse(raw) as { id?: unknown; s?: unknown }
    return typeof id === 'string' && typeof s === 'string' ? { id, serviceUrl: s } : null
  } catch {
    return null
  }
}

/**
 * The Teams side of proving a Teams account without Entra: the code goes to the Teams user the link names, in
 * the bot's 1:1 chat with them, as a card naming who will answer as them ("Olivia Operator (olivia) will answer
 * as you…") with "This is not me"; the code is typed on the gateway's page by the person who signed in. A
 * forwarded link sends the code to its sender, never to the person who opened it. "This is not me" (an invoke
 * whose sender Teams vouches for) ends the link when that user pressed it, and changes nothing otherwise.
 */
export class TeamsLinkCodes {
  readonly #o: TeamsLinkCodesOptions

  constructor(options: TeamsLinkCodesOptions) {
    this.#o = options
  }

  /** Sends `code` to the Teams user its link names; resolves the error code when it was not sent. */
  async send(code: LinkCode): Promise<string | null> {
    const reach = decodeReach(code.reach)
    const { account, person } = code.summary
    if (reach === null) return 'no_address'
    try {
      const chat = await this.#o.connector.createPersonal(reach.serviceUrl, account.workspace, reach.id, {
        retry: false,
      })
      const card = linkCodeCard({ person: personName(person), code: code.code, ref: code.ref })
      await this.#o.connector.post(reach.serviceUrl, chat.id, cardActivity(card), { retry: false })
      return null
    } catch (err) {
      const error = err instanceof TeamsApiError ? err.code : 'teams_failed'
      this.#o.log.warn({ error }, 'teams: the code to link an account was not sent')
      return error
    }
  }

  /** "This is not me", pressed by `clicker` on the card of the link `ref` names: the card it becomes. */
  async notMe(clicker: ChatAccount, ref: unknown): Promise<AdaptiveCard> {
    const result = await declineLinkCode(this.#o, clicker, typeof ref === 'string' ? ref : undefined)
    if (result === null)
      return noticeCard({ text: 'This code no longer works: nothing will be linked.', tone: 'warning' })
    if (result.outcome === 'mismatch')
      return noticeCard({ text: 'This code was not sent to you: nothing changed.', tone: 'warning' })
    return linkDeclinedCard(personName(result.person))
  }
}
