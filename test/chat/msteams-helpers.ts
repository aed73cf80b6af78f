import assert from 'node:assert/strict'
import {
  type BotFrameworkStandIn,
  type ConnectorActivity,
  invokeActivity,
  type TeamsUser,
} from '../fixtures/bot-framework.ts'
import { waitFor } from '../helpers/wait.ts'

/** An Adaptive Card as the stand-in recorded it. */
export type Card = { body: Record<string, unknown>[]; actions?: Record<string, unknown>[] }

/** The card of a posted activity (or of an activity body). */
export function cardOf(activity: ConnectorActivity | Record<string, unknown>): Card {
  const a = ('activity' in activity ? activity.activity : activity) as { attachments?: { content: Card }[] }
  const card = a.attachments?.[0]?.content
  assert.ok(card, 'a card')
  return card
}

/** All of a card's text (runs and blocks), joined. */
export function cardText(card: Card): string {
  return (
    JSON.stringify(card)
      .match(/"text":"((?:[^"\\]|\\.)*)"/g)
      ?.map((m) => JSON.parse(m.slice(7)) as string)
      .join('') ?? ''
  )
}

/** The card posted in `conversation` whose text holds `title`. */
export function cardAbout(
  bf: BotFrameworkStandIn,
  conversation: string,
  title: string,
): Promise<ConnectorActivity> {
  return waitFor(`the card about “${title}”`, () =>
    bf.posted(conversation).find((a) => cardText(cardOf(a)).includes(title)),
  )
}

/** Every action of a card: its own, and those of the action sets in its body ("I'm on it"). */
export function actionsOf(card: Card): Record<string, unknown>[] {
  const sets = card.body.filter((e) => e.type === 'ActionSet')
  return [...(card.actions ?? []), ...sets.flatMap((e) => e.actions as Record<string, unknown>[])]
}

/** The Action.Execute of a card with `title`. */
export function action(card: Card, title: string): { verb: string; data: Record<string, unknown> } {
  const found = actionsOf(card).find((a) => a.type === 'Action.Execute' && a.title === title)
  assert.ok(found, `no “${title}” on ${JSON.stringify(actionsOf(card))}`)
  return { verb: String(found.verb), data: found.data as Record<string, unknown> }
}

/** The URL of a card's Action.OpenUrl with `title`. */
export function openUrl(card: Card, title: string): string {
  const url = card.actions?.find((a) => a.type === 'Action.OpenUrl' && a.title === title)?.url
  assert.ok(typeof url === 'string', `no “${title}” link`)
  return url
}

/**
 * `user` clicks `title` on the card `posted` in `conversation` (with `inputs` merged, as Teams does), through the
 * messaging endpoint `endpoint` with a signed invoke; resolves the card they get back.
 */
export async function clickCard(
  bf: BotFrameworkStandIn,
  endpoint: string,
  conversation: string,
  user: TeamsUser,
  posted: ConnectorActivity,
  title: string,
  inputs: Record<string, string> = {},
): Promise<Card> {
  const { verb, data } = action(cardOf(posted), title)
  const res = await bf.send(
    endpoint,
    invokeActivity(
      { serviceUrl: bf.serviceUrl, conversationId: `${conversation};messageid=${posted.id}` },
      user,
      { verb, data: { ...data, ...inputs } },
      posted.id,
    ),
  )
  assert.equal(res.status, 200, res.text)
  const body = res.json as { statusCode: number; type: string; value: Card }
  assert.equal(body.type, 'application/vnd.microsoft.card.adaptive')
  return body.value
}
