import type { FieldDef } from '../protocol/fields.ts'

/** A question as a chat message showed it: what an answer is checked against, and what closes it. */
export interface PostedQuestion {
  readonly title: string
  readonly help?: string
  readonly fields: readonly FieldDef[]
  readonly revision: number
  readonly deadline: string | null
}

/**
 * A message the gateway posted in a chat channel about one thing (a question, a handoff), so that what
 * follows (a reminder, the closing, an answer given with its buttons) finds it on any replica.
 */
export interface ChatMessage {
  /** Where it is: the platform's channel and message id (Slack: channel id and `ts`). */
  readonly channel: string
  readonly ts: string
  readonly kasmId: string
  readonly team: string
  readonly run: string
  /** The question's request id, or `escalation` for a handoff. */
  readonly item: string
  /** The question as posted (absent for a handoff, or a question whose definition could not be read). */
  readonly question?: PostedQuestion
  readonly state: 'open' | 'closed'
  /** How a closed question closed, as its message says (for a click that comes after). */
  readonly closing?: {
    /** `reply`, `timeout`, `cancelled`, `run_ended`, … */
    readonly by: string
    /** The closing line (mrkdwn): "Answered by … · …", "Timed out…". */
    readonly line: string
  }
}

/** What a message is about: the target (a channel's label), the session, the run and the item. */
export interface ChatMessageKey {
  readonly target: string
  readonly kasmId: string
  readonly run: string
  readonly item: string
}

/** The flat key of a message's record. */
export function chatMessageKey(key: ChatMessageKey): string {
  return [key.target, key.kasmId, key.run, key.item].join('\u0000')
}

/** How long a posted message is remembered: longer than any question or handoff waits. */
export const CHAT_MESSAGE_TTL_MS = 7 * 24 * 3600 * 1000

/** Where posted messages are remembered: this process's memory, or Redis shared by every replica. */
export interface ChatMessageStore {
  put(key: ChatMessageKey, message: ChatMessage): Promise<void>
  get(key: ChatMessageKey): Promise<ChatMessage | null>
}

/** {@link ChatMessageStore} of one replica: the most recent `capacity` messages. */
export class MemoryChatMessageStore implements ChatMessageStore {
  readonly #messages = new Map<string, { message: ChatMessage; until: number }>()
  readonly #capacity: number

  constructor(capacity = 10_000) {
    this.#capacity = capacity
  }

  async put(key: ChatMessageKey, message: ChatMessage): Promise<void> {
    const k = chatMessageKey(key)
    this.#messages.delete(k)
    this.#messages.set(k, { message: structuredClone(message), until: Date.now() + CHAT_MESSAGE_TTL_MS })
    if (this.#messages.size > this.#capacity) {
      const oldest = this.#messages.keys().next().value
      if (oldest !== undefined) this.#messages.delete(oldest)
    }
  }

  async get(key: ChatMessageKey): Promise<ChatMessage | null> {
    const entry = this.#messages.get(chatMessageKey(key))
    return entry === undefined || entry.until <= Date.now() ? null : structuredClone(entry.message)
  }
}
