import type { ChatKind } from '../identity/chat-link-store.ts'
import type { ChatDeliveryResult, ChatJob } from './outbox.ts'

/**
 * A chat platform the gateway posts to and is answered from. Slack is the first (src/chat/slack); Microsoft
 * Teams would be the next: Adaptive Cards for the messages, `Action.Execute` for the answers, the Bot
 * Framework for the transport. What is not the platform's is shared and stays where it is: who a chat user
 * is and until when (linked accounts, src/identity), whether they may answer and the path an answer takes
 * (chat/answers.ts), what a question is and where its messages are (chat/runtime-reads.ts, chat/messages.ts),
 * and when to post (the notify watcher, through chat/outbox.ts). An adapter renders, transports and parses.
 */
export interface ChatAdapter {
  readonly chat: ChatKind
  /**
   * One notification to one channel: post the question's message, thread a reminder under it, update it
   * when the question closes (and the same for handoffs). Called in order per channel, off the event path.
   */
  deliver(job: ChatJob): Promise<ChatDeliveryResult>
  /** Starts what receives interactions without an inbound request (Slack's Socket Mode). */
  start(): Promise<void>
  close(): Promise<void>
}
