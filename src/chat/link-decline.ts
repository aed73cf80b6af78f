import { randomUUID } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import type { AuditStreams } from '../audit/streams.ts'
import type { ChatAccount } from '../identity/chat-link-store.ts'
import type { ChatLinkFlow } from '../identity/link-flow.ts'

/** What a "This is not me" works with. */
export interface LinkDeclineDeps {
  readonly flow: ChatLinkFlow
  readonly audit: AuditStreams
  readonly log: FastifyBaseLogger
}

/** The person whose pending link was declined (for the chat's answer), or null when there was none. */
export type LinkDecline = Awaited<ReturnType<ChatLinkFlow['decline']>>

/**
 * "This is not me", clicked by `clicker` (the platform says who, in a signed interaction) on the code of the
 * link `ref` names: it ends the link when `clicker` is the chat user the link names, and changes nothing for
 * anyone else (audited as refused). Both are audit records of `auth/slack-link`, `action: not_me`, with the
 * chat as `via`. Shared by the chat adapters; each renders the result.
 */
export async function declineLinkCode(
  deps: LinkDeclineDeps,
  clicker: ChatAccount,
  ref: string | undefined,
  clientIp?: string,
): Promise<LinkDecline> {
  const result = ref === undefined ? null : await deps.flow.decline(ref, clicker)
  if (result === null) return null
  const record = {
    at: new Date().toISOString(),
    requestId: randomUUID(),
    ...(clientIp === undefined ? {} : { clientIp }),
    kasmId: null,
    method: 'POST',
    route: 'auth/slack-link',
    action: 'not_me',
    via: clicker.chat,
    latencyMs: 0,
  }
  if (result.outcome === 'mismatch') {
    // Not the chat user the link names: the link is left as it was, for its own user to decide.
    deps.log.warn(
      { sub: result.person.sub, chat: clicker.chat },
      '"This is not me" from another chat user; ignored',
    )
    deps.audit.recordRefusal({
      ...record,
      sub: null,
      outcome: 'refused',
      status: 403,
      error: 'chat_link_mismatch',
    })
    return result
  }
  deps.audit.record({ ...record, sub: result.person.sub, outcome: 'forwarded', status: 200 })
  return result
}

/** "Olivia Operator (olivia)", or the `sub` alone. */
export function personName(person: { readonly sub: string; readonly name?: string }): string {
  return person.name === undefined ? person.sub : `${person.name} (${person.sub})`
}
