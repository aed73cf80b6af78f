import type { WebClient } from '@slack/web-api'
import type { FastifyBaseLogger } from 'fastify'
import type { AuditStreams } from '../../audit/streams.ts'
import type { ChatAccount } from '../../identity/chat-link-store.ts'
import type { ChatLinkFlow, LinkCode } from '../../identity/link-flow.ts'
import { declineLinkCode, personName } from '../link-decline.ts'
import { linkCodeMessage, linkDeclinedMessage } from './blocks.ts'
import { slackErrorCode } from './error-code.ts'
import type { SlackMetrics } from './metrics.ts'

/** What {@link SlackLinkCodes} works with. */
export interface SlackLinkCodesOptions {
  readonly web: WebClient
  readonly flow: ChatLinkFlow
  readonly audit: AuditStreams
  readonly metrics: SlackMetrics
  readonly log: FastifyBaseLogger
}

/** Where a "This is not me" came from: the message it was on, and Slack's address. */
export interface NotMeOrigin {
  readonly channel: string | undefined
  readonly ts: string | undefined
  readonly clientIp?: string
}

/**
 * The Slack side of proving a Slack account without Sign in with Slack (identity/link-flow.ts): the code
 * goes to the Slack user the link names as a direct message from the bot, naming who will answer as them;
 * "This is not me" on it (a signed interaction, so Slack says who clicked) ends the link when that user
 * clicked it, and changes nothing for anyone else. Both are audit records of `auth/slack-link`.
 */
export class SlackLinkCodes {
  readonly #o: SlackLinkCodesOptions

  constructor(options: SlackLinkCodesOptions) {
    this.#o = options
  }

  /** Sends `code` to the Slack user its link names; resolves Slack's error code when it was not sent. */
  async send(code: LinkCode): Promise<string | null> {
    const { account, person } = code.summary
    try {
      await this.#o.web.chat.postMessage({
        channel: account.user,
        ...linkCodeMessage({ person: personName(person), code: code.code, ref: code.ref }),
      })
      return null
    } catch (err) {
      const error = slackErrorCode(err)
      this.#o.log.warn({ error }, 'slack: the code to link an account was not sent')
      return error
    }
  }

  /** "This is not me", clicked by `clicker` on the message of the link `ref` names. */
  async notMe(clicker: ChatAccount, ref: string | undefined, origin: NotMeOrigin): Promise<void> {
    const result = await declineLinkCode(this.#o, clicker, ref, origin.clientIp)
    this.#o.metrics.interactions.inc({ type: 'not_me', outcome: result?.outcome ?? 'expired' })
    if (result?.outcome !== 'declined' || origin.channel === undefined || origin.ts === undefined) return
    await this.#o.web.chat
      .update({ channel: origin.channel, ts: origin.ts, ...linkDeclinedMessage(personName(result.person)) })
      .catch((err: unknown) =>
        this.#o.log.warn({ error: slackErrorCode(err) }, 'slack: the code message was not updated'),
      )
  }
}
