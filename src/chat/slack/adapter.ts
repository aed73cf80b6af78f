import type { ChatAdapter } from '../adapter.ts'
import type { ChatDeliveryResult, ChatJob } from '../outbox.ts'
import type { InteractionOrigin, SlackInteractions } from './interactions.ts'
import type { SlackMessages } from './messages.ts'
import type { SlackSocketMode } from './socket-mode.ts'

/**
 * The Slack app as the gateway's chat adapter: its messages (blocks.ts, messages.ts), its interactions
 * (interactions.ts) through the Request URL (routes/slack.ts) or Socket Mode (socket-mode.ts).
 */
export class SlackAdapter implements ChatAdapter {
  readonly chat = 'slack' as const
  readonly messages: SlackMessages
  readonly interactions: SlackInteractions
  /** GATEWAY_SLACK_SIGNING_SECRET: the Request URL is served only with it. */
  readonly signingSecret: string | null
  readonly socketMode: SlackSocketMode | null

  constructor(parts: {
    messages: SlackMessages
    interactions: SlackInteractions
    signingSecret: string | null
    socketMode: SlackSocketMode | null
  }) {
    this.messages = parts.messages
    this.interactions = parts.interactions
    this.signingSecret = parts.signingSecret
    this.socketMode = parts.socketMode
  }

  deliver(job: ChatJob): Promise<ChatDeliveryResult> {
    return this.messages.deliver(job)
  }

  /** One interaction payload, verified as Slack's by its transport. */
  handle(payload: unknown, origin: InteractionOrigin = {}) {
    return this.interactions.handle(payload, origin)
  }

  async start(): Promise<void> {
    this.socketMode?.start()
  }

  async close(): Promise<void> {
    await this.socketMode?.close()
  }
}
