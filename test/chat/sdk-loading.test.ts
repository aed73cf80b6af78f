// test-runner: own process (it records which modules a gateway loads: a shared process has loaded them already)
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { register } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { pathToFileURL } from 'node:url'

/**
 * A gateway without Slack or Teams never loads their SDKs (a third to half a second of CPU in every process
 * that imports the gateway: each boot, each test file); one with a chat loads that chat's. What is loaded is
 * read from a resolve hook registered before the gateway's first module: nothing of src/ is imported
 * statically here, or it would be loaded before the hook could see it.
 */

const dir = await mkdtemp(join(tmpdir(), 'krg-sdk-loading-'))
after(() => rm(dir, { recursive: true, force: true }))
const seenFile = join(dir, 'resolved.txt')
const hooks = join(dir, 'hooks.mjs')
await writeFile(seenFile, '')
await writeFile(
  hooks,
  `import { appendFileSync } from 'node:fs'
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  appendFileSync(${JSON.stringify(seenFile)}, resolved.url + '\\n')
  return resolved
}
`,
)
register(pathToFileURL(hooks))

/** The npm packages resolved so far, e.g. `@slack/web-api`. */
async function packagesLoaded(): Promise<Set<string>> {
  const urls = (await readFile(seenFile, 'utf8')).split('\n')
  return new Set(
    urls.flatMap((url) => {
      const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)
      return m?.[1] === undefined ? [] : [m[1]]
    }),
  )
}

const SDKS = ['@slack/web-api', '@slack/socket-mode', '@microsoft/teams.api']

const { buildApp } = await import('../../src/app.ts')
const { loadConfig } = await import('../../src/config.ts')
const { testEnv } = await import('../helpers/jwt.ts')

/** Builds a gateway with `env` and closes it. */
async function boot(env: Record<string, string>): Promise<void> {
  const app = await buildApp(loadConfig(testEnv(env)))
  await app.ready()
  await app.close()
}

test('without a chat, no chat SDK is loaded; Slack loads its two, Teams its own', async () => {
  await boot({})
  const plain = await packagesLoaded()
  assert.ok(plain.has('fastify'), 'the hook sees the gateway’s packages')
  assert.deepEqual(
    SDKS.filter((sdk) => plain.has(sdk)),
    [],
  )

  await boot({
    GATEWAY_SLACK_BOT_TOKEN: 'xoxb-sdk-loading',
    GATEWAY_SLACK_APP_TOKEN: 'xapp-sdk-loading',
    GATEWAY_SLACK_API_URL: 'http://127.0.0.1:9/api/',
  })
  const slack = await packagesLoaded()
  assert.deepEqual(
    SDKS.filter((sdk) => slack.has(sdk)),
    ['@slack/web-api', '@slack/socket-mode'],
  )

  await boot({
    GATEWAY_TEAMS_APP_ID: '00000000-0000-4000-8000-0000000000aa',
    GATEWAY_TEAMS_APP_PASSWORD: 'sdk-loading',
    GATEWAY_TEAMS_TENANT_ID: '00000000-0000-4000-8000-0000000000bb',
    GATEWAY_TEAMS_OPENID_URL: 'http://127.0.0.1:9/openid',
    GATEWAY_TEAMS_LOGIN_URL: 'http://127.0.0.1:9',
    GATEWAY_TEAMS_SERVICE_URLS: 'http://127.0.0.1:9/amer/',
  })
  assert.ok((await packagesLoaded()).has('@microsoft/teams.api'))
})
