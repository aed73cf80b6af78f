import type { ChatKind } from '../identity/chat-link-store.ts'
import type { ChatAdapter } from './adapter.ts'
import type { ChatDeliveryResult, ChatJob } from './outbox.ts'

/**
 * The chat adapters configured (Slack, Teams, or both), one per kind: attention routing hands each chat
 * target's job to the adapter of its kind (`ChatTarget.chat`); a target of a kind not configured is given up
 * with `chat_not_configured` (the boot warns of it).
 */
export class ChatAdapters {
  readonly #adapters: ReadonlyMap<ChatKind, ChatAdapter>

  constructor(adapters: readonly ChatAdapter[]) {
    this.#adapters = new Map(adapters.map((a) => [a.chat, a]))
  }

  /** The adapter of `kind`, if configured. */
  get(kind: ChatKind): ChatAdapter | undefined {
    return this.#adapters.get(kind)
  }

  /** The kinds configured. */
  get kinds(): ChatKind[] {
    return [...this.#adapters.keys()]
  }

  /** Delivers a job through the adapter of its target's kind. */
  async deliver(job: ChatJob): Promise<ChatDeliveryResult> {
    const adapter = this.#adapters.get(job.target.chat)
    if (adapter === undefined) return { ok: false, error: 'chat_not_configured' }
    return adapter.deliver(job)
  }

  async start(): Promise<void> {
    for (const adapter of this.#adapters.values()) await adapter.start()
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#adapters.values()].map((a) => a.close()))
  }
}
