import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Notification } from '../../src/notify/notification.ts'
import type { ChatTarget } from '../../src/notify/targets.ts'
import type { FieldDef } from '../../src/protocol/fields.ts'
import { postInteraction, type SlackMessage, type SlackUser } from '../fixtures/slack-api.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import {
  buttons,
  CHANNEL,
  click,
  ephemeralAfter,
  link,
  linkIn,
  messageAbout,
  notifyFile,
  OLIVIA,
  OSCAR,
  type SlackStack,
  startSlackStack,
  textOf,
  threadTexts,
  VICTOR,
} from './helpers.ts'

/**
 * "I'm on it" from Slack and who holds a question on its message, against a real gateway, its IdP, the
 * simulated runtime and Slack's stand-in: the button goes through the console's claim route as the person
 * (its rules, its audit record), the escalation engine sees the claim on the board and the message names the
 * holder (`request.claimed`), and a `person:` target of the notify file gets the same card as direct messages.
 * A reminder and a lapse, which come with time, are handed to the adapter as the chat outbox hands them.
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

/**
 * Waits until the outbox has recorded `type` as sent to `target`: the adapter has returned, so its copy of the
 * message is remembered (a reminder handed over before that has nothing to thread on, and is dropped).
 */
async function sent(stack: SlackStack, target: ChatTarget, type: Notification['type']): Promise<void> {
  const authorization = `Bearer ${await bearer({ roles: ['admin'] })}`
  await waitFor(`${type} sent to ${target.label}`, async () => {
    const res = await fetch(`${stack.base}admin/notifications`, { headers: { authorization } })
    const { deliveries } = (await res.json()) as {
      deliveries: { target: string; type: string; status: string }[]
    }
    return deliveries.some((d) => d.target === target.label && d.type === type && d.status === 'sent')
  })
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
  const file = await notifyFile({ blue: [{ slack: { channel: CHANNEL } }, { person: 'oscar' }] })
  // A claim outlives the test (the lapse is handed to the adapter below): a slow machine never sees one lapse.
  const stack = await startSlackStack(t, {
    env: { GATEWAY_NOTIFY_FILE: file, GATEWAY_CLAIM_TTL_S: '3600' },
  })
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

  await link(stack, OLIVIA, message, 'olivia', 'krg:claim')
  await link(stack, OSCAR, message, 'oscar', 'krg:choose:0')
  await link(stack, VICTOR, message, 'victor', 'krg:choose:0')
  // Oscar's click on the message as it is now, arriving after Olivia took the question.
  const late = stack.slack.click(OSCAR, message, 'krg:claim')

  await t.test(
    'a linked operator takes it through the console’s route: audited as from Slack, and the message names her',
    async () => {
      const before = stack.slack.ephemerals(OLIVIA.id).length
      await click(stack, OLIVIA, message, 'krg:claim')
      const held = await waitFor('Olivia’s claim', () => holderOf(stack, q.request_id))
      assert.deepEqual([held.sub, held.name], ['olivia', 'Olivia Operator'])
      const [record] = await waitFor('the audit record', async () => {
        const records = await claimRecords(stack, q.request_id)
        return records.length > 0 ? records : undefined
      })
      assert.deepEqual(
        [record?.sub, record?.name, record?.action, record?.run, record?.via, record?.status, record?.team],
        ['olivia', 'Olivia Operator', 'claim', stack.rt.run, 'slack', 200, 'blue'],
      )
      // The engine saw the claim on the board: the message says it for everyone, in place.
      await waitFor('the holder on the message', () => textOf(message).includes('is on it since'))
      assert.ok(
        textOf(message).includes(`*Olivia Operator* is on it since ${since(held.at)}`),
        textOf(message),
      )
      assert.match(textOf(message), /A question is waiting/)
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
      // Done, she is told nothing of her own, and the thread stays quiet.
      assert.equal(stack.slack.ephemerals(OLIVIA.id).length, before)
      assert.equal(stack.slack.thread(message.ts).length, 0)
    },
  )

  await t.test(
    'someone else is told who holds it and since when, only them; a viewer may not take it',
    async () => {
      const held = await holderOf(stack, q.request_id)
      assert.ok(held)
      const before = stack.slack.ephemerals(OSCAR.id).length
      assert.equal((await postInteraction(stack.interactions, late)).status, 200)
      const reply = await ephemeralAfter(stack.slack, OSCAR, before)
      assert.equal(reply.args.channel, CHANNEL)
      assert.equal(
        (reply.args.blocks as { text: { text: string } }[])[0]?.text.text,
        `*Olivia Operator* is already on this question since ${since(held.at)}.`,
      )
      const refused = (await claimRecords(stack, q.request_id)).find((r) => r.sub === 'oscar')
      assert.deepEqual([refused?.status, refused?.error, refused?.via], [409, 'question_taken', 'slack'])

      const back = await told(stack, OSCAR, message, 'krg:release')
      assert.match(
        String(back.args.text),
        /Olivia Operator is on this question since .*: only they can give it back/,
      )
      const viewer = await told(stack, VICTOR, message, 'krg:release')
      assert.match(String(viewer.args.text), /You may only watch this session/)
      assert.equal((await holderOf(stack, q.request_id))?.sub, 'olivia')
    },
  )

  await t.test('the holder gives it back: off the board, audited, and off the message', async () => {
    await click(stack, OLIVIA, message, 'krg:release')
    await waitFor('the claim given back', async () => (await holderOf(stack, q.request_id)) === undefined)
    const records = await waitFor('the release’s audit record', async () => {
      const r = (await claimRecords(stack, q.request_id)).filter((x) => x.action === 'release')
      return r.length > 1 ? r : undefined
    })
    assert.deepEqual(
      records.map((r) => [r.sub, r.status, r.via]),
      [
        ['oscar', 409, 'slack'],
        ['olivia', 204, 'slack'],
      ],
    )
    await waitFor('the holder off the message', () => buttons(message)['krg:claim'] !== undefined)
    assert.doesNotMatch(textOf(message), /is on it/)
    // Given back is no news: nothing is threaded, nobody gets a direct message about it.
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
      const title = 'Retry the export?'
      const dm = stack.rt.ask({ title, fields: CHOICE })
      const inChannel = await messageAbout(stack, title)
      const card = await messageAbout(stack, title, OSCAR.id)
      assert.equal(card.channel, stack.slack.dm(OSCAR.id), 'in the DM Slack opened for the user id')
      const posts = stack.slack.of('chat.postMessage').filter((c) => JSON.stringify(c.args).includes(title))
      assert.deepEqual(posts.map((c) => c.args.channel).sort(), [CHANNEL, OSCAR.id].sort())
      assert.deepEqual(Object.keys(buttons(card)), [
        'krg:choose:0',
        'krg:choose:1',
        'krg:claim',
        'krg:console',
      ])

      // A reminder threads under the DM's message, in the DM's own channel.
      await sent(stack, OSCAR_DM, 'request.opened')
      const opened = about(stack, dm.request_id, title, 'request.opened', { reminder: true })
      await deliver(stack, opened, OSCAR_DM)
      assert.match((await threadTexts(stack.slack, card.ts))[0] ?? '', /Reminder/)

      // Taken from the DM: both cards say so.
      await click(stack, OSCAR, card, 'krg:claim')
      const held = await waitFor('Oscar’s claim', () => holderOf(stack, dm.request_id))
      await waitFor('the holder on the DM’s card', () => textOf(card).includes('*Oscar Operator* is on it'))
      await waitFor('the holder in the channel', () =>
        textOf(inChannel).includes('*Oscar Operator* is on it'),
      )

      // The claim lapses (as the engine tells it): the holder's DM says so and its card is free again; nobody
      // else is told.
      const lapsed = about(stack, dm.request_id, title, 'request.unclaimed', {
        unclaimed: { holder: held, reason: 'lapsed' },
      })
      await deliver(stack, lapsed, OSCAR_DM)
      await deliver(stack, lapsed, OLIVIA_DM)
      await deliver(stack, lapsed, TEAM_CHANNEL)
      assert.doesNotMatch(textOf(card), /is on it/)
      assert.deepEqual(
        stack.slack
          .posts(OSCAR.id)
          .map((m) => m.text)
          .filter((text) => text.includes('lapsed')),
        ['Your claim on “Retry the export?” lapsed after 3600 s without an answer; the escalation goes on.'],
      )
      assert.equal(stack.slack.posts(OLIVIA.id).filter((m) => m.text.includes('lapsed')).length, 0)
      assert.equal(stack.slack.posts(CHANNEL).filter((m) => m.text.includes('lapsed')).length, 0)

      // Answered from the DM: the runtime has it, and the DM's card closes like the channel's.
      await click(stack, OSCAR, card, 'krg:choose:0')
      await waitFor('the DM’s card closed', () => textOf(card).includes('Question closed'))
      assert.match(textOf(card), /Answered by Oscar Operator in Slack · Browser: chrome/)
      await waitFor('the channel’s card closed', () => textOf(inChannel).includes('Question closed'))
      assert.ok(
        stack.slack.of('chat.update').every((c) => c.args.channel !== OSCAR.id),
        'updates name the DM',
      )
    },
  )
})

test('a claim from Slack that lapses: the engine frees the message and tells the holder in a direct message', async (t) => {
  // The shortest claim there is: the lapse itself is the behaviour, and the engine arms it from the claim's time.
  const stack = await startSlackStack(t, { env: { GATEWAY_CLAIM_TTL_S: '1' } })
  stack.rt.ask({ title: 'Warm up', fields: CHOICE })
  await link(stack, OLIVIA, await messageAbout(stack, 'Warm up'), 'olivia', 'krg:choose:0')
  const q = stack.rt.ask({ title: 'Ship it?', fields: CHOICE })
  const message = await messageAbout(stack, 'Ship it?')
  await click(stack, OLIVIA, message, 'krg:claim')
  const told = await waitFor('the holder told', () =>
    stack.slack.posts(OLIVIA.id).find((m) => m.text.includes('lapsed')),
  )
  assert.equal(
    told.text,
    'Your claim on “Ship it?” lapsed after 1 s without an answer; the escalation goes on.',
  )
  assert.equal(told.channel, stack.slack.dm(OLIVIA.id))
  assert.equal(await holderOf(stack, q.request_id), undefined, 'off the board')
  // The message named her (an update) and is free again (another), whatever order a slow machine saw.
  await waitFor(
    'the message free again',
    () => message.updates >= 2 && buttons(message)['krg:claim'] !== undefined,
  )
  assert.doesNotMatch(textOf(message), /is on it/)
  // Only the holder is told: the channel's thread stays quiet.
  assert.equal(stack.slack.thread(message.ts).length, 0)
})
