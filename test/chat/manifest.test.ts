import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { parse } from 'yaml'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { BOT_TOKEN, SIGNING_SECRET } from '../fixtures/slack-api.ts'
import { testEnv } from '../helpers/jwt.ts'

/** deploy/slack/manifest.yaml asks Slack for what the gateway serves and needs, and nothing more. */

const manifest = parse(
  await readFile(new URL('../../deploy/slack/manifest.yaml', import.meta.url), 'utf8'),
) as {
  oauth_config: { redirect_urls: string[]; scopes: { bot: string[]; user: string[] } }
  settings: { interactivity: { is_enabled: boolean; request_url: string }; socket_mode_enabled: boolean }
  features: { bot_user: { display_name: string } }
}

test('the manifest: interactivity at the Request URL the gateway serves, Sign in with Slack’s callback, the one bot scope', () => {
  const base = 'https://gateway.example.com/'
  assert.equal(manifest.settings.interactivity.is_enabled, true)
  assert.equal(manifest.settings.interactivity.request_url, `${base}slack/interactions`)
  assert.deepEqual(manifest.oauth_config.redirect_urls, [`${base}auth/slack-link/slack-callback`])
  assert.deepEqual(manifest.oauth_config.scopes.bot, ['chat:write'])
  assert.deepEqual(manifest.oauth_config.scopes.user, ['openid'])
  assert.equal(manifest.settings.socket_mode_enabled, false)
  assert.ok(manifest.features.bot_user.display_name.length <= 80)
})

test('the gateway serves what the manifest points Slack at', async (t) => {
  const app = await buildApp(
    loadConfig(
      testEnv({
        GATEWAY_SLACK_BOT_TOKEN: BOT_TOKEN,
        GATEWAY_SLACK_SIGNING_SECRET: SIGNING_SECRET,
        GATEWAY_SLACK_CLIENT_ID: '1234.5678',
        GATEWAY_SLACK_CLIENT_SECRET: 'slackclientsecretfortests01',
      }),
    ),
  )
  t.after(() => app.close())
  await app.ready()
  for (const url of [manifest.settings.interactivity.request_url, ...manifest.oauth_config.redirect_urls]) {
    const path = new URL(url).pathname
    const method = path.endsWith('interactions') ? 'POST' : 'GET'
    assert.ok(app.hasRoute({ method, url: path }), `${method} ${path}`)
  }
})
