import { z } from 'zod'

/**
 * The part of a Bot Framework Activity the gateway reads, parsed from what Teams (or anyone) posted to the
 * messaging endpoint. Everything is bounded and everything else is dropped: an activity is hostile input
 * until its bearer token is checked, and its text stays data afterwards.
 */

/** The longest id we accept (Teams' ids are far shorter: `19:…@thread.tacv2`, `29:…`, `a:…`). */
const MAX_ID = 512
const id = z.string().min(1).max(MAX_ID)
const name = z.string().max(512)

/** A person or the bot in an activity (`from`, `recipient`, `membersAdded`). */
const account = z.object({
  id,
  /** The person's Entra object id (absent for the bot and for guests of some kinds). */
  aadObjectId: z.string().max(64).optional(),
  name: name.optional(),
})

const conversation = z.object({
  id,
  /** `channel`, `groupChat` or `personal`. */
  conversationType: z.string().max(32).optional(),
  tenantId: z.string().max(64).optional(),
  name: name.optional(),
  isGroup: z.boolean().optional(),
})

const named = z.object({ id: id.optional(), name: name.optional() })

const channelData = z.object({
  tenant: z.object({ id: z.string().max(64) }).optional(),
  team: named.optional(),
  channel: named.optional(),
  /** `conversationUpdate`: what changed (`channelCreated`, `teamRenamed`, …). */
  eventType: z.string().max(64).optional(),
})

/** A mention entity: `{ type: 'mention', mentioned: { id, name }, text }`; other entities are kept loosely. */
const entity = z
  .object({
    type: z.string().max(64),
    mentioned: z.object({ id: z.string().max(MAX_ID), name: name.optional() }).optional(),
  })
  .passthrough()

/** The activity as the gateway reads it. */
export const teamsActivitySchema = z.object({
  type: z.string().min(1).max(64),
  id: z.string().max(MAX_ID).optional(),
  /** Where replies go: checked against the bearer token's `serviceurl` and GATEWAY_TEAMS_SERVICE_URLS. */
  serviceUrl: z.string().min(1).max(2048),
  channelId: z.string().max(64).optional(),
  from: account,
  recipient: account.optional(),
  conversation,
  channelData: channelData.optional(),
  /** An invoke's payload (`adaptiveCard/action`: `{ action: { verb, data, … }, trigger }`). */
  value: z.unknown().optional(),
  /** An invoke's name. */
  name: z.string().max(128).optional(),
  text: z.string().max(100_000).optional(),
  entities: z.array(entity).max(100).optional(),
  membersAdded: z.array(account).max(1000).optional(),
  membersRemoved: z.array(account).max(1000).optional(),
  replyToId: z.string().max(MAX_ID).optional(),
})

/** A parsed inbound activity. */
export type TeamsActivity = z.infer<typeof teamsActivitySchema>

/** The activity of `body`, or null when it is not one. */
export function parseActivity(body: unknown): TeamsActivity | null {
  const parsed = teamsActivitySchema.safeParse(body)
  return parsed.success ? parsed.data : null
}

/** The activity's tenant: Teams puts it in `channelData.tenant.id`, and in `conversation.tenantId`. */
export function activityTenants(activity: TeamsActivity): string[] {
  const out: string[] = []
  if (activity.channelData?.tenant?.id !== undefined) out.push(activity.channelData.tenant.id)
  if (activity.conversation.tenantId !== undefined) out.push(activity.conversation.tenantId)
  return out
}

/** An Adaptive Card (its JSON: `type: 'AdaptiveCard'`, `version`, `body`, `actions`, …). */
export type AdaptiveCard = Record<string, unknown>

/**
 * What the messaging endpoint answers an invoke with: the HTTP status and body Teams reads. For
 * `adaptiveCard/action` the body is `{ statusCode: 200, type: 'application/vnd.microsoft.card.adaptive',
 * value: <card> }` (the card replaces the one clicked, for the person who clicked).
 */
export interface TeamsInvokeResponse {
  readonly status: number
  readonly body: {
    readonly statusCode: number
    readonly type: string
    readonly value: unknown
  }
}

/** Answers an `adaptiveCard/action` invoke whose bearer token and tenant were checked (H5: invoke.ts). */
export type TeamsInvokeHandler = (activity: TeamsActivity) => Promise<TeamsInvokeResponse>

/** The media type of an invoke answer that is a card. */
export const ADAPTIVE_CARD_TYPE = 'application/vnd.microsoft.card.adaptive'

/** An invoke answer that replaces the clicked card with `card`. */
export function cardInvokeResponse(card: AdaptiveCard): TeamsInvokeResponse {
  return { status: 200, body: { statusCode: 200, type: ADAPTIVE_CARD_TYPE, value: card } }
}

/** An outbound activity the connector posts or updates (a message with text and/or attachments). */
export interface OutboundActivity {
  readonly type: 'message'
  readonly text?: string
  /** `plain` or `markdown` (Teams renders `text` as markdown unless told otherwise). */
  readonly textFormat?: 'plain' | 'markdown' | 'xml'
  readonly attachments?: readonly { readonly contentType: string; readonly content: unknown }[]
  readonly replyToId?: string
  readonly summary?: string
  readonly entities?: readonly Record<string, unknown>[]
}
