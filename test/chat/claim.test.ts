import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Notification } from '../../src/notify/notification.ts'
import type { ChatTarget } from '../../src/notify/targets.ts'
import type { FieldDef } from '../../src/protocol/fields.ts'
import { postInteraction, type SlackMessage, type SlackUser } from '../fixtures/slack-api.ts'
import { waitFor } from '../helpers/wait.ts'
import {
  buttons,
  CHANNEL,
  click,
  ephemeralAfter,
  link,
  linkIn,
  messageAbout,
  OLIVIA,
  OSCAR,
  type SlackStack,
  startSlackStack,
  TOKEN,
  textOf,
  threadTexts,
  VICTOR,
} from './helpers.ts'

/**
 * "I'm on it" from Slack and who holds a question on its message, against a real gateway, its IdP, the
 * simulated runtime and Slack's stand-in: the button goes through the console's claim route as the person
 * (its rules, its audit record), the message names the holder when a `request.claimed` reaches the adapter,
 * and a `person:` target gets the same card as direct messages. The claimed and unclaimed notifications are
 * handed to the adapter here as the chat outbox hands them (src/escalation derives them from the board).
 */

const CHOICE: FieldDef[] = [
  { id: 'browser', type: 'string', required: true, enum: ['chrome', 'firefox'], label: 'Browser' },
]
const TEAM_CHANNEL: ChatTarget = { chat: 'slack', channel: CHANNEL, label: `slack:${CHANNEL}` }
const OLIVIA_DM: ChatTarget = { chat: 'slack', channel: OLIVIA.id, label: 'person:olivia/slack' }
const OSCAR_DM: ChatTarget = { chat: 'slack', channel: OSCAR.id, label: 'person:oscar/slack' }

/** A notification about question `id` of the runtime's run, as the notify watcher and src/escalation build them. */
function about(
  stack: SlackStack,
  id: string,
  title: string,
  type: Notification['type'],
  more: Partial<Notification> = {},
): Notification {
  const seq = Math.floor(Math.random() * 1e9)
  return {
    key: ['k1', stack.rt.run, String(seq), type, id, more.reminder ? 'reminder' : ''].join('\u0000'),
    type,
    kasmId: 'k1',
    team: 'blue',
    run: stack.rt.run,
    seq,
    reminder: false,
    request: { request_id: id, title, deadline: null, field_ids: ['browser'] },
    ...more,
  }
}

/** Hands one notification to the Slack adapter, as the chat outbox does; it must be delivered. */
async function deliver(stack: SlackStack, notification: Notification, target: ChatTarget): Promise<void> {
  const chat = stack.app.chat
  assert.ok(chat)
  const url = `${stack.base}sessions/k1?run=${stack.rt.run}&request=${notification.request?.request_id}`
  const result = await chat.deliver({ key: notification.key, delivery: 'test', notification, target, url })
  assert.deepEqual(result, { ok: true })
}

/** The claim on the question on the board, as the console's overview reads it. */
async function holderOf(stack: SlackStack, id: string) {
  return (await stack.app.overview.claims.of('k1', stack.rt.run)).get(id)
}

/** The claim records of the audit log for question `id`, oldest first. */
async function claimRecords(stack: SlackStack, id: string) {
  const records = await stack.app.audit.recent({ limit: 200, kasmId: 'k1' })
  return records.filter((r) => r.route === 'claim' && r.question === id).reverse()
}

/** Slack's rendering of a holder's time: the reader's zone, else `HH:MM UTC`. */
function since(iso: string): string {
  return `<!date^${Math.floor(Date.parse(iso) / 1000)}^{time}|${iso.slice(11, 16)} UTC>`
}

/** Clicks `actionId` and resolves the ephemeral reply it brings `user`. */
async function told(stack: SlackStack, user: SlackUser, message: SlackMessage, actionId: string) {
  const before = stack.slack.ephemerals(user.id).length
  await click(stack, user, message, actionId)
  return ephemeralAfter(stack.slack, user, before)
}

test("I'm on it from Slack: the console's rules and audit, the holder on the message, and direct messages to a person", async (t) => {
  const stack = await startSlackStack(t)
  const q = stack.rt.ask({ title: 'Which browser?', fields: CHOICE })
  const message = await messageAbout(stack, 'Which browser?')

  await t.test(
    'the button sits beside the answers; an unlinked user is offered the link, and nothing is taken',
    async () => {
      assert.deepEqual(Object.keys(buttons(message)), [
        'krg:choose:0',
        'krg:choose:1',
        'krg:claim',
        'krg:console',
      ])
      assert.equal((buttons(message)['krg:claim']?.text as { text?: string } | undefined)?.text, 'I’m on it')
      const prompt = await told(stack, OLIVIA, message, 'krg:claim')
      assert.match(String(prompt.args.text), /Connect your Slack account/)
      assert.ok(linkIn(prompt).startsWith(`${stack.base}auth/slack-link?t=`))
      assert.equal(await holderOf(stack, q.request_id), undefined)
    },
  )

  await t.test(
    'a linked operator takes it through the console’s route: on the board, audited as from Slack',
    async () => {
      await link(stack, OLIVIA, message, 'olivia', 'krg:claim')
      const before = stack.slack.ephemerals(OLIVIA.id).length
      await click(stack, OLIVIA, message, 'krg:claim')
      const held = await waitFor('Olivia’s claim', () => holderOf(stack, q.request_id))
      assert.equal(held.name, 'Olivia Operator')
      assert.equal(held.sub, 'olivia')
      const [record] = await waitFor('the audit record', async () => {
        const records = await claimRecords(stack, q.request_id)
        return records.length > 0 ? records : undefined
      })
      assert.deepEqual(
        [record?.sub, record?.name, record?.action, record?.run, record?.via, record?.status, record?.team],
        ['olivia', 'Olivia Operator', 'claim', stack.rt.run, 'slack', 200, 'blue'],
      )
      // Done, the person is told nothing: the message says it for everyone once the claim is seen.
      assert.equal(stack.slack.ephemerals(OLIVIA.id).length, before)
    },
  )

  await t.test('someone else is told who holds it and since when, only them; taking nothing', async () => {
    await link(stack, OSCAR, message, 'oscar', 'krg:choose:0')
    const held = await holderOf(stack, q.request_id)
    assert.ok(held)
    const reply = await told(stack, OSCAR, message, 'krg:claim')
    assert.equal(reply.args.channel, CHANNEL)
    assert.equal(
      (reply.args.blocks as { text: { text: string } }[])[0]?.text.text,
      `*Olivia Operator* is already on this question since ${since(held.at)}.`,
    )
    assert.equal((await holderOf(stack, q.request_id))?.sub, 'olivia')
    const refused = (await claimRecords(stack, q.request_id)).find((r) => r.sub === 'oscar')
    assert.deepEqual([refused?.status, refused?.error, refused?.via], [409, 'question_taken', 'slack'])
  })

  await t.test('request.claimed: the message names the holder and offers “Give it back”', async () => {
    const held = await holderOf(stack, q.request_id)
    assert.ok(held)
    await deliver(
      stack,
      about(stack, q.request_id, 'Which browser?', 'request.claimed', { claim: held }),
      TEAM_CHANNEL,
    )
    assert.equal(message.updates, 1)
    assert.deepEqual(Object.keys(buttons(message)), [
      'krg:choose:0',
      'krg:choose:1',
      'krg:release',
      'krg:console',
    ])
    assert.equal(
      (buttons(message)['krg:release']?.text as { text?: string } | undefined)?.text,
      'Give it back',
    )
    assert.ok(textOf(message).includes(`*Olivia Operator* is on it since ${since(held.at)}`), textOf(message))
    assert.match(textOf(message), /A question is waiting/)
  })

  await t.test(
    '“Give it back” by someone else is refused naming the holder; a viewer may not take it',
    async () => {
      const reply = await told(stack, OSCAR, message, 'krg:release')
      assert.match(
        String(reply.args.text),
        /Olivia Operator is on this question since .*: only they can give it back/,
      )
      assert.equal((await holderOf(stack, q.request_id))?.sub, 'olivia')
      await link(stack, VICTOR, message, 'victor', 'krg:choose:0')
      const viewer = await told(stack, VICTOR, message, 'krg:release')
      assert.match(String(viewer.args.text), /You may only watch this session/)
      assert.equal((await holderOf(stack, q.request_id))?.sub, 'olivia')
    },
  )

  await t.test('the holder gives it back; request.unclaimed takes the holder off the message', async () => {
    await click(stack, OLIVIA, message, 'krg:release')
    await waitFor('the claim given back', async () => (await holderOf(stack, q.request_id)) === undefined)
    const records = await waitFor('the release’s audit record', async () => {
      const r = (await claimRecords(stack, q.request_id)).filter((x) => x.action === 'release')
      return r.length > 0 ? r : undefined
    })
    assert.deepEqual(
      records.map((r) => [r.sub, r.status, r.via]),
      [
        ['oscar', 409, 'slack'],
        ['olivia', 204, 'slack'],
      ],
    )
    await deliver(
      stack,
      about(stack, q.request_id, 'Which browser?', 'request.unclaimed', {
        unclaimed: {
          holder: { sub: 'olivia', name: 'Olivia Operator', at: new Date().toISOString() },
          reason: 'released',
        },
      }),
      TEAM_CHANNEL,
    )
    assert.equal(message.updates, 2)
    assert.deepEqual(Object.keys(buttons(message)).slice(2), ['krg:claim', 'krg:console'])
    assert.doesNotMatch(textOf(message), /is on it/)
    // A claim given back is no news to the channel: nothing is threaded, nobody gets a direct message.
    assert.equal(stack.slack.thread(message.ts).length, 0)
    assert.equal(stack.slack.posts(OLIVIA.id).filter((m) => m.text.includes('lapsed')).length, 0)
  })

  await t.test(
    'a click on a question that closed meanwhile: the person is told, nothing is taken',
    async () => {
      const stale = stack.slack.click(OSCAR, message, 'krg:claim')
      await click(stack, OLIVIA, message, 'krg:choose:1')
      await waitFor('the question closed', () => textOf(message).includes('Question closed'))
      assert.deepEqual(Object.keys(buttons(message)), ['krg:console'], 'no claim on a closed question')
      const before = stack.slack.ephemerals(OSCAR.id).length
      assert.equal((await postInteraction(stack.interactions, stale)).status, 200)
      const reply = await ephemeralAfter(stack.slack, OSCAR, before)
      assert.match(String(reply.args.text), /This question is no longer open/)
    },
  )

  await t.test(
    'a person target: the card in their direct messages, answerable there, updated there',
    async () => {
      const dm = stack.rt.ask({ title: 'Retry the export?', fields: CHOICE })
      const title = 'Retry the export?'
      const opened = about(stack, dm.request_id, title, 'request.opened')
      await deliver(stack, opened, OSCAR_DM)
      const [card] = stack.slack.posts(OSCAR.id).filter((m) => JSON.stringify(m.blocks).includes(title))
      assert.ok(card)
      const posts = stack.slack.of('chat.postMessage').filter((c) => JSON.stringify(c.args).includes(title))
      assert.ok(
        posts.some((c) => c.args.channel === OSCAR.id),
        'posted to the user id: Slack opens the DM',
      )
      assert.equal(card.channel, stack.slack.dm(OSCAR.id))
      assert.deepEqual(Object.keys(buttons(card)), [
        'krg:choose:0',
        'krg:choose:1',
        'krg:claim',
        'krg:console',
      ])
      // The team's channel has its own card (the notify file's target), posted by the watcher.
      const inChannel = await messageAbout(stack, title)

      // A reminder threads under the DM's message, in the DM's own channel.
      await deliver(stack, { ...opened, key: `${opened.key}r`, reminder: true }, OSCAR_DM)
      assert.match((await threadTexts(stack.slack, card.ts))[0] ?? '', /Reminder/)

      // Taken from the DM, shown there.
      await click(stack, OSCAR, card, 'krg:claim')
      const held = await waitFor('Oscar’s claim', () => holderOf(stack, dm.request_id))
      await deliver(stack, about(stack, dm.request_id, title, 'request.claimed', { claim: held }), OSCAR_DM)
      assert.match(textOf(card), /\*Oscar Operator\* is on it since/)

      // The claim lapses: the holder's DM says so and the card is free again; the channel's card only changes.
      const lapsed = about(stack, dm.request_id, title, 'request.unclaimed', {
        unclaimed: { holder: held, reason: 'lapsed' },
      })
      await stack.app.overview.claims.clear('k1', stack.rt.run, dm.request_id)
      await deliver(stack, lapsed, OSCAR_DM)
      await deliver(stack, lapsed, TEAM_CHANNEL)
      await deliver(stack, lapsed, OLIVIA_DM)
      assert.doesNotMatch(textOf(card), /is on it/)
      assert.deepEqual(
        stack.slack
          .posts(OSCAR.id)
          .map((m) => m.text)
          .filter((text) => text.includes('lapsed')),
        ['Your claim on “Retry the export?” lapsed after 90 s without an answer; the escalation goes on.'],
      )
      assert.equal(stack.slack.posts(OLIVIA.id).filter((m) => m.text.includes('lapsed')).length, 0)
      assert.equal(stack.slack.posts(CHANNEL).filter((m) => m.text.includes('lapsed')).length, 0)
      assert.deepEqual(Object.keys(buttons(inChannel)).slice(2), ['krg:claim', 'krg:console'])

      // Answered from the DM: the runtime has it, and the DM's card closes like the channel's.
      await click(stack, OSCAR, card, 'krg:choose:0')
      await waitFor('the reply', async () => {
        const res = await fetch(`${stack.rt.url}requests/${dm.request_id}`, {
          headers: { 'x-kasm-runtime-session-token': TOKEN },
        })
        return ((await res.json()) as { state?: string }).state === 'closed'
      })
      await deliver(
        stack,
        about(stack, dm.request_id, title, 'request.closed', {
          request: { request_id: dm.request_id, title, deadline: null, field_ids: [], closed_by: 'reply' },
        }),
        OSCAR_DM,
      )
      assert.match(textOf(card), /Answered by Oscar Operator in Slack · Browser: chrome/)
      assert.ok(
        stack.slack.of('chat.update').every((c) => c.args.channel !== OSCAR.id),
        'updates name the DM',
      )
    },
  )
})
