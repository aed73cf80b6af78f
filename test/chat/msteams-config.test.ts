import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { loadConfig } from '../../src/config.ts'
import { type ChatTarget, loadNotifyFile } from '../../src/notify/targets.ts'
import { APP_ID, APP_PASSWORD, TENANT_ID } from '../fixtures/bot-framework.ts'
import { testEnv } from '../helpers/jwt.ts'

/** The Teams bot's variables and notify-file entries: each refusal at boot, the secret file, a good entry. */

const teams = {
  GATEWAY_TEAMS_APP_ID: APP_ID,
  GATEWAY_TEAMS_APP_PASSWORD: APP_PASSWORD,
  GATEWAY_TEAMS_TENANT_ID: TENANT_ID,
}

const configError = (env: Record<string, string>): string => {
  try {
    loadConfig(testEnv(env))
  } catch (err) {
    return (err as Error).message
  }
  throw new Error('the configuration was accepted')
}

test('the Teams variables: all three or none, the public origin, https in production, loopback-only http', () => {
  const defaults = loadConfig(testEnv(teams)).env
  assert.equal(
    defaults.GATEWAY_TEAMS_OPENID_URL,
    'https://login.botframework.com/v1/.well-known/openidconfiguration',
  )
  assert.equal(defaults.GATEWAY_TEAMS_LOGIN_URL, 'https://login.microsoftonline.com')
  assert.deepEqual(defaults.GATEWAY_TEAMS_SERVICE_URLS, [
    'https://smba.trafficmanager.net/',
    'https://smba.infra.gcc.teams.microsoft.com/',
    'https://smba.infra.gov.teams.microsoft.us/',
    'https://smba.infra.dod.teams.microsoft.us/',
  ])
  assert.match(
    configError({ GATEWAY_TEAMS_APP_ID: APP_ID }),
    /GATEWAY_TEAMS_APP_ID, GATEWAY_TEAMS_APP_PASSWORD and GATEWAY_TEAMS_TENANT_ID: set all three or none/,
  )
  assert.match(
    configError({ ...teams, GATEWAY_TEAMS_APP_ID: 'my-bot' }),
    /GATEWAY_TEAMS_APP_ID: must be the bot's/,
  )
  assert.match(
    configError({ ...teams, GATEWAY_TEAMS_TENANT_ID: 'contoso' }),
    /GATEWAY_TEAMS_TENANT_ID: must be/,
  )
  assert.match(
    configError({ ...teams, GATEWAY_PUBLIC_ORIGIN: '' }),
    /GATEWAY_PUBLIC_ORIGIN: required with GATEWAY_TEAMS_APP_ID/,
  )
  assert.match(
    configError({ ...teams, GATEWAY_TEAMS_SERVICE_URLS: 'https://smba.trafficmanager.net' }),
    /GATEWAY_TEAMS_SERVICE_URLS\.0: each must be an http\(s\) URL with a path ending in \//,
  )
  assert.match(
    configError({ ...teams, GATEWAY_TEAMS_SERVICE_URLS: 'http://connector.example/' }),
    /GATEWAY_TEAMS_SERVICE_URLS: http:\/\/connector\.example\/ must be https/,
  )
  assert.doesNotThrow(() =>
    loadConfig(testEnv({ ...teams, GATEWAY_TEAMS_SERVICE_URLS: 'http://127.0.0.1:9/amer/' })),
  )
  const production = {
    ...teams,
    NODE_ENV: 'production',
    GATEWAY_TEAMS_OPENID_URL: 'http://127.0.0.1:9/v1/.well-known/openidconfiguration',
    GATEWAY_TEAMS_LOGIN_URL: 'http://127.0.0.1:9',
    GATEWAY_TEAMS_SERVICE_URLS: 'http://127.0.0.1:9/amer/',
  }
  const message = configError(production)
  assert.match(message, /GATEWAY_TEAMS_OPENID_URL: must be https in production/)
  assert.match(message, /GATEWAY_TEAMS_LOGIN_URL: must be https in production/)
  assert.match(message, /GATEWAY_TEAMS_SERVICE_URLS: http:\/\/127\.0\.0\.1:9\/amer\/ must be https/)
})

test('the Teams password can be read from GATEWAY_TEAMS_APP_PASSWORD_FILE', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-teams-secret-'))
  const path = join(dir, 'password')
  await writeFile(path, `${APP_PASSWORD}\n`)
  const env = { ...teams, GATEWAY_TEAMS_APP_PASSWORD: '', GATEWAY_TEAMS_APP_PASSWORD_FILE: path }
  assert.equal(loadConfig(testEnv(env)).env.GATEWAY_TEAMS_APP_PASSWORD, APP_PASSWORD)
})

test('a Teams channel in the notify file: needs the bot, a channel id, a serviceUrl within the allowlist', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-teams-notify-'))
  const write = async (content: unknown) => {
    const path = join(dir, `notify-${Math.random().toString(36).slice(2)}.json`)
    await writeFile(path, JSON.stringify(content))
    return path
  }
  const good = {
    msteams: { conversation: '19:abc123@thread.tacv2', serviceUrl: 'https://smba.trafficmanager.net/amer/' },
  }
  const load = async (content: unknown, env: Record<string, string>) => {
    const chat = new Map<string, ChatTarget[]>()
    await loadNotifyFile(await write(content), loadConfig(testEnv(env)).env, chat)
    return chat
  }
  const chat = await load(
    { teams: { red: [good, { slack: { channel: 'C0RED0001' } }] } },
    {
      ...teams,
      GATEWAY_SLACK_BOT_TOKEN: 'xoxb-0000-test',
    },
  )
  assert.deepEqual(chat.get('red'), [
    {
      chat: 'msteams',
      conversation: '19:abc123@thread.tacv2',
      serviceUrl: 'https://smba.trafficmanager.net/amer/',
      label: 'msteams:19:abc123@thread.tacv2',
    },
    { chat: 'slack', channel: 'C0RED0001', label: 'slack:C0RED0001' },
  ])
  await assert.rejects(
    load({ teams: { red: [good] } }, {}),
    /teams\."red"\[0\]: a Teams channel needs GATEWAY_TEAMS_APP_ID/,
  )
  const bad = {
    teams: {
      red: [
        { msteams: { conversation: '19:abc@thread.tacv2;messageid=1', serviceUrl: good.msteams.serviceUrl } },
        { msteams: { conversation: 'General', serviceUrl: good.msteams.serviceUrl } },
        { msteams: { conversation: '19:abc@thread.tacv2', serviceUrl: 'https://evil.example/amer/' } },
        { msteams: { conversation: '19:abc@thread.tacv2' } },
      ],
    },
  }
  const message = await load(bad, teams).then(
    () => '',
    (err: Error) => err.message,
  )
  assert.match(message, /\[0\]: msteams\.conversation: must be a channel's conversation id/)
  assert.match(message, /\[1\]: msteams\.conversation: must be a channel's conversation id/)
  assert.match(message, /\[2\]: msteams\.serviceUrl: not within GATEWAY_TEAMS_SERVICE_URLS/)
  assert.match(message, /\[3\]: msteams\.serviceUrl: is required/)
})
