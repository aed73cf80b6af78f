import type { ChatAdapter } from '../adapter.ts'
import type { ChatDeliveryResult, ChatJob } from '../outbox.ts'
import type { TeamsInvoke } from './invoke.ts'
import type { TeamsLinkCodes } from './link-codes.ts'
import type { TeamsMessages } from './messages.ts'

/**
 * The Teams bot as the gateway's chat adapter: its cards (cards.ts, messages.ts), its invokes (invoke.ts),
 * linking by code in its 1:1 chat (link-codes.ts). The transport (bearer check, connector, the messaging
 * endpoint) is the msteams plugin's; invokes reach {@link TeamsAdapter.invoke} through it.
 */
export class TeamsAdapter implements ChatAdapter {
  readonly chat = 'msteams' as const
  readonly messages: TeamsMessages
  readonly invoke: TeamsInvoke
  readonly linkCodes: TeamsLinkCodes

  constructor(parts: { messages: TeamsMessages; invoke: TeamsInvoke; linkCodes: TeamsLinkCodes }) {
    this.messages = parts.messages
    this.invoke = parts.invoke
    this.linkCodes = parts.linkCodes
  }

  deliver(job: ChatJob): Promise<ChatDeliveryResult> {
    return this.messages.deliver(job)
  }

  /** Interactions arrive through the messaging endpoint only. */
  async start(): Promise<void> {}

  async close(): Promise<void> {}
}
