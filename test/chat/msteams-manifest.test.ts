import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { startBotFramework } from '../fixtures/bot-framework.ts'
import { testEnv } from '../helpers/jwt.ts'

/**
 * deploy/msteams/manifest.json, the Teams app package's manifest: current schema, the bot id and the gateway's
 * host named by the placeholders docs/chat.md tells an administrator to replace, the icons it names present,
 * and the messaging endpoint the docs give served by the gateway.
 */

const dir = new URL('../../deploy/msteams/', import.meta.url)
const raw = await readFile(new URL('manifest.json', dir), 'utf8')
const manifest = JSON.parse(raw) as {
  $schema: string
  manifestVersion: string
  id: string
  developer: Record<string, string>
  name: { short: string; full: string }
  description: { short: string; full: string }
  icons: { color: string; outline: string }
  bots: { botId: string; scopes: string[]; isNotificationOnly: boolean }[]
  validDomains: string[]
}
const APP_ID = '{{GATEWAY_TEAMS_APP_ID}}'
const HOST = '{{GATEWAY_PUBLIC_HOST}}'

test('the manifest: the current schema, one bot whose id is the app id placeholder, the gateway host', () => {
  const version = /\/teams\/v(\d+\.\d+)\/MicrosoftTeams\.schema\.json$/.exec(manifest.$schema)?.[1]
  assert.equal(manifest.manifestVersion, version)
  assert.ok(Number(version?.split('.')[1]) >= 30, `schema ${version} is current (1.30, August 2026)`)
  assert.equal(manifest.id, APP_ID)
  assert.equal(manifest.bots.length, 1)
  assert.equal(manifest.bots[0]?.botId, APP_ID)
  assert.deepEqual(manifest.bots[0]?.scopes, ['team', 'groupChat', 'personal'])
  assert.equal(manifest.bots[0]?.isNotificationOnly, false, 'cards are answered: the bot is interactive')
  assert.deepEqual(manifest.validDomains, [HOST])
  for (const url of ['websiteUrl', 'privacyUrl', 'termsOfUseUrl'])
    assert.equal(manifest.developer[url], `https://${HOST}/`)
  // Teams' limits: short name 30, short description 80, full 4000.
  assert.ok(manifest.name.short.length <= 30)
  assert.ok(manifest.description.short.length <= 80)
  assert.ok(manifest.description.full.length <= 4000)
  // No placeholder other than the ones the docs name.
  const placeholders = new Set(raw.match(/\{\{[A-Z_]+\}\}/g))
  assert.deepEqual([...placeholders].sort(), ['{{GATEWAY_PUBLIC_HOST}}', APP_ID, '{{ORGANISATION}}'].sort())
})

test('the icons the manifest names are there, PNGs of the sizes Teams asks (192 colour, 32 outline)', async () => {
  for (const [file, size] of [
    [manifest.icons.color, 192],
    [manifest.icons.outline, 32],
  ] as const) {
    const png = await readFile(new URL(file, dir))
    assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG', file)
    assert.equal(png.readUInt32BE(16), size, `${file} width`)
    assert.equal(png.readUInt32BE(20), size, `${file} height`)
  }
})

test('docs/chat.md gives the placeholders and the messaging endpoint, which the gateway serves', async (t) => {
  const docs = await readFile(new URL('../../docs/chat.md', import.meta.url), 'utf8')
  for (const placeholder of [APP_ID, HOST, '{{ORGANISATION}}'])
    assert.ok(docs.includes(placeholder), placeholder)
  const endpoint = /`(https:\/\/\{\{GATEWAY_PUBLIC_HOST\}\}\/\S*teams\/messages)`/.exec(docs)?.[1]
  assert.ok(endpoint, 'the messaging endpoint is in the docs')
  const bf = await startBotFramework()
  t.after(() => bf.close())
  const app = await buildApp(loadConfig(testEnv(bf.env())))
  t.after(() => app.close())
  await app.ready()
  const path = new URL(endpoint.replace(HOST, 'gateway.example.com')).pathname
  assert.ok(app.hasRoute({ method: 'POST', url: path }), `POST ${path}`)
})
