import assert from 'node:assert/strict'
import { test } from 'node:test'
import { APP_TOKEN } from '../fixtures/slack-api.ts'
import { waitFor } from '../helpers/wait.ts'
import {
  buttons,
  confirmWithCode,
  linkIn,
  messageAbout,
  OLIVIA,
  openLink,
  type SlackStack,
  startSlackStack,
  textOf,
} from './helpers.ts'

/**
 * Socket Mode with the official SDK: no Request URL, each replica connected to Slack through
 * `apps.connections.open` and a WebSocket (the stand-in's), interactions acknowledged on it; and the
 * connection made again after it drops, after Slack asks for it, and after Slack's API failed once.
 */

const CHOICE = [
  { id: 'browser', type: 'string', required: true, enum: ['chrome', 'firefox'], label: 'Browser' },
]

async function socketStack(t: Parameters<typeof startSlackStack>[0]): Promise<SlackStack> {
  // Socket Mode only: no signing secret, so no Request URL.
  return startSlackStack(t, { env: { GATEWAY_SLACK_APP_TOKEN: APP_TOKEN, GATEWAY_SLACK_SIGNING_SECRET: '' } })
}

async function gauge(stack: SlackStack): Promise<string | undefined> {
  const text = await (await fetch(`${stack.origin}/metrics`)).text()
  return text.split('\n').find((l) => l.startsWith('krg_slack_socket_connected '))
}

test('Socket Mode: interactions arrive over the WebSocket and are acknowledged on it; a user links and answers', async (t) => {
  const stack = await socketStack(t)
  await waitFor('one Socket Mode connection', () => stack.slack.openSockets === 1)
  assert.equal(stack.slack.of('apps.connections.open')[0]?.token, APP_TOKEN)
  assert.equal(await gauge(stack), 'krg_slack_socket_connected 1')
  const notThere = await fetch(stack.interactions, { method: 'POST' })
  assert.equal(notThere.status, 404, 'no Request URL without a signing secret')

  stack.rt.ask({ title: 'Which browser?', fields: CHOICE })
  const message = await messageAbout(stack, 'Which browser?')
  assert.deepEqual(Object.keys(buttons(message)), [
    'krg:choose:0',
    'krg:choose:1',
    'krg:claim',
    'krg:console',
  ])
  assert.deepEqual(await stack.slack.sendOverSocket(stack.slack.click(OLIVIA, message, 'krg:choose:1')), {})
  const prompt = await waitFor('the link', () => stack.slack.ephemerals(OLIVIA.id)[0])
  const { browser, page } = await openLink(linkIn(prompt), 'olivia')
  assert.equal((await confirmWithCode(stack.slack, OLIVIA, browser, page)).done.status, 200)

  await stack.slack.sendOverSocket(stack.slack.click(OLIVIA, message, 'krg:choose:1'))
  await waitFor('the message updated', () => message.updates === 1)
  assert.match(textOf(message), /Answered by Olivia Operator in Slack · Browser: firefox/)

  // The modal the same way: the submission's acknowledgement carries the response action.
  stack.rt.ask({ title: 'How many nights?', fields: [{ id: 'nights', type: 'integer', required: true }] })
  const form = await messageAbout(stack, 'How many nights?')
  await stack.slack.sendOverSocket(stack.slack.click(OLIVIA, form, 'krg:answer'))
  await waitFor('the modal', () => stack.slack.modal(OLIVIA) !== undefined)
  const ack = await stack.slack.sendOverSocket(
    stack.slack.submit(OLIVIA, { 'f:nights': { v: { type: 'number_input', value: 'two' } } }),
  )
  assert.deepEqual(ack, { response_action: 'errors', errors: { 'f:nights': 'must be a number' } })
  const sent = await stack.slack.sendOverSocket(
    stack.slack.submit(OLIVIA, { 'f:nights': { v: { type: 'number_input', value: '2' } } }),
  )
  assert.deepEqual(sent, { response_action: 'clear' })
  await waitFor('closed', () => form.updates === 1)
  assert.match(textOf(form), /Answered by Olivia Operator in Slack · nights: 2/)
})

test('Socket Mode connects again after the connection drops, after Slack asks it to, and after Slack’s API failed once', async (t) => {
  const stack = await socketStack(t)
  await waitFor('connected', () => stack.slack.openSockets === 1)
  stack.rt.ask({ title: 'Warm up', fields: CHOICE })
  const warm = await messageAbout(stack, 'Warm up')
  await stack.slack.sendOverSocket(stack.slack.click(OLIVIA, warm, 'krg:choose:0'))
  const { browser, page } = await openLink(
    linkIn(await waitFor('link', () => stack.slack.ephemerals(OLIVIA.id)[0])),
    'olivia',
  )
  await confirmWithCode(stack.slack, OLIVIA, browser, page)

  // A lost network: no close frame. The first apps.connections.open after it fails too.
  stack.slack.failNext('apps.connections.open', 'internal_error')
  stack.slack.dropSockets()
  await waitFor('connected again', () => stack.slack.socketConnections === 2 && stack.slack.openSockets === 1)
  assert.ok(stack.slack.of('apps.connections.open').length >= 3, 'the failed attempt was retried')
  stack.rt.ask({ title: 'After the drop', fields: CHOICE })
  const after = await messageAbout(stack, 'After the drop')
  await stack.slack.sendOverSocket(stack.slack.click(OLIVIA, after, 'krg:choose:0'))
  await waitFor('answered over the new connection', () => after.updates === 1)

  // Slack recycles its connections now and then, asking the app to reconnect.
  stack.slack.refreshSockets()
  await waitFor(
    'connected a third time',
    () => stack.slack.socketConnections === 3 && stack.slack.openSockets === 1,
  )
  stack.rt.ask({ title: 'After the refresh', fields: CHOICE })
  const last = await messageAbout(stack, 'After the refresh')
  await stack.slack.sendOverSocket(stack.slack.click(OLIVIA, last, 'krg:choose:1'))
  await waitFor('answered again', () => last.updates === 1)
  assert.equal(await gauge(stack), 'krg_slack_socket_connected 1')
})
