import assert from 'node:assert/strict'
import { once } from 'node:events'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { type TestContext, test } from 'node:test'
import type { Operator } from '../../src/auth/operator.ts'
import type { Notification } from '../../src/notify/notification.ts'
import type { ChatTarget } from '../../src/notify/targets.ts'
import { postInteraction } from '../fixtures/slack-api.ts'
import { waitFor } from '../helpers/wait.ts'
import {
  buttons,
  CHANNEL,
  click,
  ephemeralAfter,
  link,
  messageAbout,
  OLIVIA,
  type SlackStack,
  startSlackStack,
  TOKEN,
} from './helpers.ts'

/**
 * Everything a runtime says reaches Slack escaped: each runtime-controlled string (a question's title and
 * help, a field's label, `enum` value and `pattern`, a 422's field names and messages, an error code, how a
 * question closed; and a holder's name) goes through every kind of message the gateway sends (the question's
 * message, held or not, the modal, ephemeral replies, notice modals, the closed message and its thread line,
 * the direct message telling a holder their claim lapsed), and no `<…>` of the runtime's survives anywhere:
 * only the gateway's own links to itself and its dates.
 */

/** One hostile string per input, each a different kind of Slack markup, each naming its input. */
const HOSTILE = {
  title: '<https://evil.example/title|Reconnect your Slack account>',
  help: '<!channel> <https://evil.example/help|help>',
  label: '<@U0OLIVIA1> <https://evil.example/label|label>',
  choice: '<https://evil.example/choice|choice>',
  pattern: '<https://evil\\.example/pattern\\|pattern>',
  issueField: '<https://evil.example/field|field>',
  issueError: '<!subteam^S0EVIL|evil> <https://evil.example/error|error>',
  code: '<https://evil.example/code|code>',
  closedBy: '<!here|closed>',
  holder: '<!channel> <https://evil.example/holder|holder>',
} as const

/**
 * A real HTTP front for the simulated runtime that passes everything through, except answers to a reply
 * (`POST /messages`) while `reply` is set: the runtime's 422, error codes and 409s, as a hostile one sends them.
 */
async function startFront(t: TestContext, target: string) {
  const state: { reply: { status: number; body: unknown } | null } = { reply: null }
  const server = http.createServer((req, res) => {
    const canned = state.reply
    if (canned !== null && req.method === 'POST' && req.url?.split('?')[0] === '/messages') {
      req.resume()
      res.writeHead(canned.status, { 'content-type': 'application/json' }).end(JSON.stringify(canned.body))
      return
    }
    const up = http.request(
      new URL(req.url ?? '/', target),
      { method: req.method, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers)
        r.pipe(res)
      },
    )
    up.on('error', () => res.destroy())
    res.on('close', () => up.destroy())
    req.pipe(up)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.after(() => {
    server.closeAllConnections()
    server.close()
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, state }
}

/** Every mrkdwn text of a message, ephemeral or view: `text` of messages and of every `mrkdwn` object. */
function mrkdwnTexts(value: unknown, top = true): string[] {
  if (Array.isArray(value)) return value.flatMap((v) => mrkdwnTexts(v, false))
  if (typeof value !== 'object' || value === null) return []
  const o = value as Record<string, unknown>
  const own = (top || o.type === 'mrkdwn') && typeof o.text === 'string' ? [o.text] : []
  return [...own, ...Object.values(o).flatMap((v) => mrkdwnTexts(v, false))]
}

test('every runtime-controlled string reaches every kind of Slack message escaped: no markup of the runtime survives', async (t) => {
  const stack: SlackStack = await startSlackStack(t)
  const front = await startFront(t, stack.rt.url)
  await stack.app.sessions.put({
    kasmId: 'k1',
    upstream: front.url,
    team: 'blue',
    messagingToken: TOKEN,
    source: 'admin',
  })
  stack.rt.ask({ title: 'Warm up', fields: [{ id: 'ok', type: 'boolean' }] })
  await link(stack, OLIVIA, await messageAbout(stack, 'Warm up'), 'olivia', 'krg:choose:0')

  const seen: { kind: string; texts: string[] }[] = []
  const keep = (kind: string, value: unknown) => seen.push({ kind, texts: mrkdwnTexts(value) })
  const ephemeralOf = async (action: () => Promise<unknown>) => {
    const before = stack.slack.ephemerals(OLIVIA.id).length
    await action()
    return (await ephemeralAfter(stack.slack, OLIVIA, before)).args
  }

  // A single choice (buttons): its message, then the runtime's 422, an error code, a 409 closing it.
  stack.rt.ask({
    title: `Choice ${HOSTILE.title}`,
    help: HOSTILE.help,
    fields: [
      { id: 'pick', type: 'string', required: true, label: HOSTILE.label, enum: [HOSTILE.choice, 'b'] },
    ],
  })
  const choice = await messageAbout(stack, 'Choice ')
  keep('question message (buttons)', choice)
  front.state.reply = {
    status: 422,
    body: { error: 'invalid_values', fields: [{ field: HOSTILE.issueField, error: HOSTILE.issueError }] },
  }
  keep('ephemeral: the runtime’s 422', await ephemeralOf(() => click(stack, OLIVIA, choice, 'krg:choose:0')))
  front.state.reply = { status: 400, body: { error: HOSTILE.code, message: 'no' } }
  keep('ephemeral: an error code', await ephemeralOf(() => click(stack, OLIVIA, choice, 'krg:choose:0')))
  front.state.reply = { status: 409, body: { error: 'closed', closed_by: HOSTILE.closedBy } }
  keep('ephemeral: a 409', await ephemeralOf(() => click(stack, OLIVIA, choice, 'krg:choose:0')))

  // "I'm on it" on it: held by someone whose name is markup (an IdP's, not a runtime's, escaped all the same),
  // the holder on the message, and the direct message telling the holder their claim lapsed.
  const choiceId = String(JSON.parse(String(buttons(choice)['krg:claim']?.value)).q)
  const holder = { sub: 'mallory', name: HOSTILE.holder, at: new Date().toISOString() }
  const mallory: Operator = {
    sub: holder.sub,
    name: holder.name,
    roles: new Set(['operator']),
    teams: new Set(['blue']),
    via: 'bearer',
    expiresAt: Date.now() + 3600_000,
  }
  await stack.app.overview.claims.take('k1', stack.rt.run, choiceId, mallory)
  keep('ephemeral: someone holds it', await ephemeralOf(() => click(stack, OLIVIA, choice, 'krg:claim')))
  const notice = (type: Notification['type'], more: Partial<Notification>): Notification => ({
    key: `${type}${Math.random()}`,
    type,
    kasmId: 'k1',
    team: 'blue',
    run: stack.rt.run,
    seq: 1,
    reminder: false,
    request: { request_id: choiceId, title: `Choice ${HOSTILE.title}`, deadline: null, field_ids: ['pick'] },
    ...more,
  })
  const deliver = async (n: Notification, target: ChatTarget) =>
    assert.deepEqual(
      await stack.app.chat?.deliver({ key: n.key, delivery: 'd', notification: n, target, url: stack.base }),
      { ok: true },
    )
  const channel: ChatTarget = { chat: 'slack', channel: CHANNEL, label: `slack:${CHANNEL}` }
  await deliver(notice('request.claimed', { claim: holder }), channel)
  keep('question message (held)', choice)
  const dm: ChatTarget = { chat: 'slack', channel: 'U0MALLORY', label: 'person:mallory/slack' }
  await deliver(notice('request.unclaimed', { unclaimed: { holder, reason: 'lapsed' } }), dm)
  keep('direct message: the claim lapsed', stack.slack.posts('U0MALLORY')[0])
  assert.match(
    stack.slack.posts('U0MALLORY')[0]?.text ?? '',
    /^Your claim on “Choice &lt;https.* lapsed after/,
  )

  // A form (the modal): its message, the modal, the gateway's own check of the pattern, the runtime's 422
  // and an error code in the notice modal.
  stack.rt.ask({
    title: `Form ${HOSTILE.title}`,
    help: HOSTILE.help,
    fields: [
      { id: 'code', type: 'string', required: true, label: HOSTILE.label, pattern: HOSTILE.pattern },
      { id: 'pick', type: 'string', label: HOSTILE.label, enum: [HOSTILE.choice, 'b', 'c', 'd', 'e', 'f'] },
    ],
  })
  const form = await messageAbout(stack, 'Form ')
  keep('question message (form)', form)
  const opened = stack.slack.of('views.open').length
  await click(stack, OLIVIA, form, 'krg:answer')
  await waitFor('views.open', () => stack.slack.of('views.open').length === opened + 1)
  keep('answer modal', stack.slack.modal(OLIVIA))
  const submit = async (value: string) =>
    (
      await postInteraction(
        stack.interactions,
        stack.slack.submit(OLIVIA, {
          'f:code': { v: { type: 'plain_text_input', value } },
          'f:pick': { v: { type: 'radio_buttons', selected_option: { value: '0' } } },
        }),
      )
    ).json as Record<string, unknown>
  const own = await submit('does not match')
  assert.match(
    JSON.stringify(own.errors),
    /does not match/,
    'the pattern reaches the modal’s errors (plain text)',
  )
  front.state.reply = { status: 400, body: { error: HOSTILE.code, message: 'no' } }
  const failed = await submit('<https://evil.example/pattern|pattern>')
  keep('notice modal: an error code', failed.view)
  front.state.reply = { status: 409, body: { error: 'closed', closed_by: HOSTILE.closedBy } }
  keep('notice modal: a 409', (await submit('<https://evil.example/pattern|pattern>')).view)

  // Answered for real: the closed message and its thread line name what was chosen.
  front.state.reply = null
  assert.deepEqual(await submit('<https://evil.example/pattern|pattern>'), { response_action: 'clear' })
  await waitFor('the question closed', () => textOf(form.blocks).includes('Question closed'))
  keep('closed message', form)
  keep('closing line in the thread', await waitFor('the closing line', () => stack.slack.thread(form.ts)[0]))

  const gateway = `<${stack.base}`
  for (const { kind, texts } of seen) {
    assert.ok(texts.length > 0, `${kind}: no text`)
    for (const text of texts)
      for (const markup of text.match(/<[^>]*>/g) ?? [])
        assert.ok(
          markup.startsWith(gateway) || markup.startsWith('<!date^'),
          `${kind}: ${markup} survived in ${JSON.stringify(text)}`,
        )
  }
  // Every input did reach Slack (escaped), so the checks above saw it.
  const all = seen.flatMap((s) => s.texts).join('\n')
  for (const [input, value] of Object.entries(HOSTILE))
    if (input !== 'pattern' && input !== 'closedBy')
      assert.ok(
        all.includes(value.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;')),
        input,
      )
})

function textOf(blocks: unknown): string {
  return mrkdwnTexts(blocks).join('\n')
}
