import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import type { AppOptions } from '../../src/app.ts'
import { DEMO_PEOPLE, type DemoIdpOptions, type DemoPerson } from '../../src/dev/demo-idp.ts'
import {
  type SimulatedRuntime,
  type SimulatedRuntimeOptions,
  startSimulatedRuntime,
} from '../../src/dev/runtime/index.ts'
import { fastEventEnv } from '../events/helpers.ts'
import {
  BOT_TOKEN,
  postInteraction,
  SIGNING_SECRET,
  type SlackMessage,
  type SlackStandIn,
  type SlackUser,
  startSlackStandIn,
} from '../fixtures/slack-api.ts'
import { waitFor } from '../helpers/wait.ts'
import { Browser, PASSWORD, type SignInStack, startSignInStack, type Visit } from '../signin/harness.ts'

export const TOKEN = 'messaging-token-for-slack-tests'
/** Team blue's channel in the notify file. */
export const CHANNEL = 'C0BLUE001'

/** Slack users of the stand-in's workspace, and the gateway people they link to. */
export const OLIVIA: SlackUser = { id: 'U0OLIVIA1', username: 'olivia' }
export const OSCAR: SlackUser = { id: 'U0OSCAR01', username: 'oscar' }
export const VICTOR: SlackUser = { id: 'U0VICTOR1', username: 'victor' }
export const RITA: SlackUser = { id: 'U0RITA001', username: 'rita' }

/** The demo's people and two more: Oscar, a second operator of blue, and Rita, an operator of red only. */
export const PEOPLE: readonly DemoPerson[] = [
  ...DEMO_PEOPLE,
  {
    sub: 'oscar',
    username: 'oscar',
    name: 'Oscar Operator',
    email: 'oscar@demo.invalid',
    roles: ['operator'],
    teams: ['blue'],
  },
  {
    sub: 'rita',
    username: 'rita',
    name: 'Rita Red',
    email: 'rita@demo.invalid',
    roles: ['operator'],
    teams: ['red'],
  },
]

/** A real gateway with the Slack app, its IdP, a simulated runtime as session k1 (team blue), Slack's stand-in. */
export interface SlackStack extends SignInStack {
  readonly slack: SlackStandIn
  readonly rt: SimulatedRuntime
  /** The Request URL. */
  readonly interactions: string
}

/** The Slack app's environment (the Request URL way in, unless `env` says otherwise). */
export function slackEnv(slack: SlackStandIn, notifyFile: string): Record<string, string> {
  return {
    ...fastEventEnv,
    GATEWAY_SLACK_BOT_TOKEN: BOT_TOKEN,
    GATEWAY_SLACK_SIGNING_SECRET: SIGNING_SECRET,
    GATEWAY_SLACK_API_URL: slack.apiUrl,
    GATEWAY_NOTIFY_FILE: notifyFile,
    GATEWAY_NOTIFY_RETRY_MS: '20',
    GATEWAY_NOTIFY_RETRY_FOR_S: '2',
  }
}

/** A notify file routing team blue (and any `more`) to Slack channels. */
export async function notifyFile(teams: Record<string, unknown[]> = {}): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-slack-'))
  const path = join(dir, 'notify.json')
  await writeFile(path, JSON.stringify({ teams: { blue: [{ slack: { channel: CHANNEL } }], ...teams } }))
  return path
}

export async function startSlackStack(
  t: TestContext,
  options: {
    env?: Record<string, string>
    runtime?: SimulatedRuntimeOptions
    idp?: DemoIdpOptions
    app?: AppOptions
  } = {},
): Promise<SlackStack> {
  const slack = await startSlackStandIn()
  t.after(() => slack.close())
  const file = await notifyFile()
  const stack = await startSignInStack(t, {
    env: { ...slackEnv(slack, file), ...options.env },
    idp: { people: PEOPLE, ...options.idp },
    ...(options.app === undefined ? {} : { app: options.app }),
  })
  const rt = await startSimulatedRuntime({
    messagingToken: TOKEN,
    sessionToken: 'session-token-for-slack-tests',
    ...options.runtime,
  })
  t.after(() => rt.close())
  await stack.app.sessions.put({
    kasmId: 'k1',
    upstream: rt.url,
    team: 'blue',
    messagingToken: TOKEN,
    source: 'admin',
  })
  return { ...stack, slack, rt, interactions: `${stack.base}slack/interactions` }
}

/** The top-level message of the channel whose text names the question's title, once it is posted. */
export function messageAbout(stack: SlackStack, title: string, channel = CHANNEL): Promise<SlackMessage> {
  return waitFor(`the message about “${title}”`, () =>
    stack.slack.posts(channel).find((m) => JSON.stringify(m.blocks).includes(title)),
  )
}

/** The buttons of a message, by action id. */
export function buttons(message: SlackMessage): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {}
  for (const block of message.blocks)
    for (const e of (block.elements as Record<string, unknown>[] | undefined) ?? [])
      if (e.type === 'button') out[String(e.action_id)] = e
  return out
}

/** The text of every block of a message (sections, contexts), joined. */
export function textOf(message: SlackMessage): string {
  const parts: string[] = []
  for (const block of message.blocks) {
    const text = block.text as { text?: string } | undefined
    if (text?.text !== undefined) parts.push(text.text)
    for (const e of (block.elements as { text?: unknown }[] | undefined) ?? [])
      if (typeof e.text === 'string') parts.push(e.text)
  }
  return parts.join('\n')
}

/** Clicks a button of a message through the Request URL; the acknowledgement must be a bare 200. */
export async function click(stack: SlackStack, user: SlackUser, message: SlackMessage, actionId: string) {
  const res = await postInteraction(stack.interactions, stack.slack.click(user, message, actionId))
  assert.equal(res.status, 200, res.text)
  return res
}

/** The last ephemeral message to `user` that has arrived since `before` of them. */
export function ephemeralAfter(slack: SlackStandIn, user: SlackUser, before: number) {
  return waitFor(`an ephemeral message to ${user.username}`, () => slack.ephemerals(user.id)[before])
}

/** The URL of the button of an ephemeral message ("Connect your Slack account"). */
export function linkIn(call: { args: Record<string, unknown> }): string {
  const blocks = call.args.blocks as { elements?: { url?: string }[] }[]
  const url = blocks.flatMap((b) => b.elements ?? []).find((e) => e.url !== undefined)?.url
  assert.ok(url, `no link in ${JSON.stringify(call.args)}`)
  return url
}

/** A new question and the link Slack shows `user` after a click on its first choice (`OLIVIA` unless told). */
export async function linkFor(stack: SlackStack, user = OLIVIA) {
  const title = `Link ${Math.random()}`
  stack.rt.ask({
    title,
    fields: [{ id: 'browser', type: 'string', required: true, enum: ['chrome', 'firefox'] }],
  })
  const message = await messageAbout(stack, title)
  const before = stack.slack.ephemerals(user.id).length
  await click(stack, user, message, 'krg:choose:0')
  return { url: linkIn(await ephemeralAfter(stack.slack, user, before)), message }
}

/**
 * Follows a link to connect a Slack account as a person would: the gateway sends the browser to the IdP,
 * which asks `username` to sign in (and to allow access), and back to the confirmation page.
 */
export async function openLink(url: string, username: string, browser = new Browser()) {
  let page = await browser.navigate(url)
  if (page.text.includes('/login"'))
    page = await browser.submit(page, '/login', { username, password: PASSWORD })
  if (page.text.includes('/consent"')) page = await browser.submit(page, '/consent')
  return { browser, page }
}

/** The code of a direct message that links a Slack account ("… *1234 5678*"). */
export function codeIn(message: SlackMessage): string {
  const code = /\*(\d{4}) (\d{4})\*/.exec(textOf(message))
  assert.ok(code, `no code in ${textOf(message)}`)
  return `${code[1]}${code[2]}`
}

/**
 * On the confirmation page `page`: asks for the code, reads it in `user`'s direct messages (the stand-in),
 * and types it; resolves the page that follows, and the message with the code.
 */
export async function confirmWithCode(slack: SlackStandIn, user: SlackUser, browser: Browser, page: Visit) {
  const before = slack.posts(user.id).length
  const asked = await browser.submit(page, 'auth/slack-link/confirm')
  assert.equal(asked.status, 200, asked.text)
  assert.match(asked.text, /Type the code from Slack/)
  const dm = await waitFor(`the code sent to ${user.username}`, () => slack.posts(user.id)[before])
  return { done: await browser.submit(asked, 'auth/slack-link/code', { code: codeIn(dm) }), dm, asked }
}

/** Links `user` to the gateway person `username`: a click, the ephemeral link, the IdP, the code from Slack. */
export async function link(
  stack: SlackStack,
  user: SlackUser,
  message: SlackMessage,
  username: string,
  actionId: string,
) {
  const before = stack.slack.ephemerals(user.id).length
  await click(stack, user, message, actionId)
  const prompt = await ephemeralAfter(stack.slack, user, before)
  const { browser, page } = await openLink(linkIn(prompt), username)
  assert.equal(page.status, 200, page.text)
  const { done } = await confirmWithCode(stack.slack, user, browser, page)
  assert.equal(done.status, 200, done.text)
  assert.match(done.text, /Your Slack account is connected/)
  return { browser }
}

/** POSTs to the runtime's messages the gateway forwarded, for "nothing was sent" checks. */
export function repliesSent(rt: SimulatedRuntime): number {
  return rt.received.filter((r) => r.method === 'POST' && r.url.split('?')[0] === '/messages').length
}

/** The texts of the threaded replies under `ts`, once `count` of them are posted. */
export async function threadTexts(slack: SlackStandIn, ts: string, count = 1): Promise<string[]> {
  const replies = await waitFor(`${count} threaded replies`, () => {
    const thread = slack.thread(ts)
    return thread.length >= count ? thread : undefined
  })
  return replies.map((m) => m.text)
}
