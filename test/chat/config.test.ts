import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { addRuntimeSession, until } from '../events/helpers.ts'
import { BOT_TOKEN, SIGNING_SECRET, startSlackStandIn } from '../fixtures/slack-api.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'
import { startReceiver } from '../notify/receiver.ts'
import { slackEnv } from './helpers.ts'

/** The Slack app's variables and notify-file entries: each refusal at boot, the secret files, both kinds of target. */

const slack = { GATEWAY_SLACK_BOT_TOKEN: BOT_TOKEN }

async function file(content: unknown): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-slack-config-'))
  const path = join(dir, 'notify.json')
  await writeFile(path, typeof content === 'string' ? content : JSON.stringify(content))
  return path
}

async function bootError(env: Record<string, string>): Promise<string> {
  try {
    const app = await buildApp(loadConfig(testEnv(env)))
    await app.close()
  } catch (err) {
    return (err as Error).message
  }
  throw new Error('the gateway booted')
}

test('every Slack variable is checked at boot, naming it', () => {
  const refused = (env: Record<string, string>, message: RegExp) =>
    assert.throws(() => loadConfig(testEnv(env)), message, JSON.stringify(env))
  refused(
    { GATEWAY_SLACK_BOT_TOKEN: 'xoxp-user-token' },
    /GATEWAY_SLACK_BOT_TOKEN: must be a bot token \(xoxb-…\)/,
  )
  refused(
    { ...slack, GATEWAY_SLACK_APP_TOKEN: 'xoxb-1' },
    /GATEWAY_SLACK_APP_TOKEN: must be an app-level token/,
  )
  refused(
    { ...slack, GATEWAY_SLACK_SIGNING_SECRET: 'short' },
    /GATEWAY_SLACK_SIGNING_SECRET: must be the app's signing secret/,
  )
  refused(
    { ...slack, GATEWAY_SLACK_API_URL: 'https://slack.com/api' },
    /GATEWAY_SLACK_API_URL: must be an http\(s\) URL ending with \//,
  )
  refused({ ...slack, GATEWAY_SLACK_LINK_TTL_S: '59' }, /GATEWAY_SLACK_LINK_TTL_S/)
  refused(
    { ...slack, GATEWAY_SLACK_CLIENT_ID: 'abc' },
    /GATEWAY_SLACK_CLIENT_ID: must be the app's client id/,
  )
  refused({ ...slack, GATEWAY_SLACK_CLIENT_ID: '1.2.3' }, /set both \(Sign in with Slack\) or neither/)
  refused(
    { GATEWAY_SLACK_SIGNING_SECRET: SIGNING_SECRET },
    /GATEWAY_SLACK_SIGNING_SECRET: needs GATEWAY_SLACK_BOT_TOKEN/,
  )
  refused({ GATEWAY_SLACK_APP_TOKEN: 'xapp-1-x' }, /GATEWAY_SLACK_APP_TOKEN: needs GATEWAY_SLACK_BOT_TOKEN/)
  refused(
    { ...slack, GATEWAY_PUBLIC_ORIGIN: '' },
    /GATEWAY_PUBLIC_ORIGIN: required with GATEWAY_SLACK_BOT_TOKEN/,
  )
  const production = {
    ...slack,
    NODE_ENV: 'production',
    GATEWAY_PUBLIC_ORIGIN: 'https://gw.example',
    GATEWAY_COOKIE_SECRET: 'c'.repeat(40),
  }
  refused(
    { ...production, GATEWAY_SLACK_API_URL: 'http://slack.test/api/' },
    /GATEWAY_SLACK_API_URL: must be https in production/,
  )
  refused(
    { ...production, GATEWAY_SLACK_OIDC_ISSUER: 'http://slack.test' },
    /GATEWAY_SLACK_OIDC_ISSUER: must be https in production/,
  )
  const ok = loadConfig(testEnv(slack)).env
  assert.deepEqual(
    [ok.GATEWAY_SLACK_API_URL, ok.GATEWAY_SLACK_OIDC_ISSUER, ok.GATEWAY_SLACK_LINK_TTL_S],
    ['https://slack.com/api/', 'https://slack.com', 2_592_000],
  )
})

test('the Slack secrets can be read from <NAME>_FILE', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-slack-secrets-'))
  const secrets: Record<string, string> = {
    GATEWAY_SLACK_BOT_TOKEN: BOT_TOKEN,
    GATEWAY_SLACK_SIGNING_SECRET: SIGNING_SECRET,
    GATEWAY_SLACK_APP_TOKEN: 'xapp-1-A000-file',
    GATEWAY_SLACK_CLIENT_SECRET: 'slackclientsecretfromfile01',
  }
  const env: Record<string, string> = { GATEWAY_SLACK_CLIENT_ID: '1234.5678' }
  for (const [name, value] of Object.entries(secrets)) {
    const path = join(dir, name)
    await writeFile(path, `${value}\n`)
    env[`${name}_FILE`] = path
  }
  const loaded = loadConfig(testEnv(env)).env as unknown as Record<string, string>
  for (const [name, value] of Object.entries(secrets)) assert.equal(loaded[name], value, name)
})

test('a Slack channel in the notify file needs the bot token and a channel id; a bad entry stops the boot', async () => {
  const withChannel = await file({ teams: { red: [{ slack: { channel: 'C0RED0001' } }] } })
  assert.match(
    await bootError({ GATEWAY_NOTIFY_FILE: withChannel }),
    /GATEWAY_NOTIFY_FILE \(.*\): teams\."red"\[0\]: a Slack channel needs GATEWAY_SLACK_BOT_TOKEN/,
  )
  const bad = await file({
    teams: {
      red: [
        { slack: { channel: '#support' } },
        { slack: { channel: 'C0RED0001', thread: true } },
        { slack: {} },
      ],
    },
  })
  const message = await bootError({ ...slack, GATEWAY_NOTIFY_FILE: bad })
  assert.match(
    message,
    /teams\."red"\[0\]: slack\.channel: must be a channel id such as C0123ABCD \(not its name\)/,
  )
  assert.match(message, /teams\."red"\[1\]: slack: Unrecognized key\(s\) in object: 'thread'/)
  assert.match(message, /teams\."red"\[2\]: slack\.channel: is required/)
})

test('a team with a webhook and a Slack channel gets both; the global webhook is not used for it', async (t) => {
  const standIn = await startSlackStandIn()
  t.after(() => standIn.close())
  const hook = await startReceiver()
  t.after(() => hook.close())
  const global = await startReceiver()
  t.after(() => global.close())
  const path = await file({ teams: { blue: [{ url: hook.url }, { slack: { channel: 'C0BLUE001' } }] } })
  const gw = await startGateway({ ...slackEnv(standIn, path), GATEWAY_NOTIFY_URL: global.url })
  t.after(() => gw.close())
  const rt = await addRuntimeSession(t, gw.app)
  rt.ask({ title: 'Both?', fields: [{ id: 'x', type: 'boolean' }] })
  await until('the webhook', () => hook.of('request.opened').length === 1)
  await until('the Slack message', () => standIn.posts('C0BLUE001').length === 1)
  rt.escalate('a barrier')
  await until('the handoff in Slack', () => standIn.posts('C0BLUE001').length === 2)
  assert.match(
    JSON.stringify(standIn.posts('C0BLUE001')[1]?.blocks),
    /Handoff:\* the agent asks a person to take over/,
  )
  assert.equal(global.received.length, 0, "the notify file's entry replaces the global webhook for blue")
  const admin = await fetch(`${gw.url}/admin/notifications`, {
    headers: {
      authorization: `Bearer ${await (await import('../helpers/jwt.ts')).bearer({ roles: ['admin'] })}`,
    },
  })
  const { deliveries } = (await admin.json()) as {
    deliveries: { target: string; type: string; status: string }[]
  }
  assert.deepEqual(
    deliveries.filter((d) => d.target === 'slack:C0BLUE001').map((d) => [d.type, d.status]),
    [
      ['escalation.started', 'sent'],
      ['request.opened', 'sent'],
    ],
  )
})

test('without the Slack app, the console’s list of links is empty and nothing else of it is served', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  const auth = { authorization: `Bearer ${await bearer({ roles: ['admin'] })}` }
  const list = await fetch(`${gw.url}/api/chat-links`, { headers: auth })
  assert.deepEqual([list.status, await list.json()], [200, { links: [] }])
  for (const [method, path] of [
    ['POST', '/slack/interactions'],
    ['GET', '/auth/slack-link?t=x'],
    ['GET', '/admin/chat-links'],
    ['DELETE', '/api/chat-links/slack/T0TEST001/U0OLIVIA1'],
  ] as const)
    assert.equal((await fetch(`${gw.url}${path}`, { method, headers: auth })).status, 404, path)
  assert.equal(gw.app.chat, null)
  assert.equal(gw.app.people.links, null)
})
