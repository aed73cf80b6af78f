import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { parse } from 'yaml'
import { ConfigError, configVariables, loadConfig, secretFileVariables } from '../../src/config.ts'
import { loadSessionsFile } from '../../src/sessions/file.ts'
import { chartDir, helmUnavailable, only } from './helm.ts'
import { gatewayContainer, podEnvironment, render, scenarios } from './scenarios.ts'

/** Variables that go into the Secret (or existingSecret) instead of the ConfigMap. */
const secretVariables = [
  'GATEWAY_JWT_SECRET',
  'GATEWAY_COOKIE_SECRET',
  'GATEWAY_ENCRYPTION_KEY',
  'GATEWAY_OIDC_CLIENT_SECRET',
  'REDIS_URL',
  'GATEWAY_REDIS_SENTINEL_PASSWORD',
  'GATEWAY_SESSIONS_FILE',
  'GATEWAY_KASM_API_KEY',
  'GATEWAY_KASM_API_SECRET',
  'GATEWAY_NOTIFY_URL',
  'GATEWAY_NOTIFY_SECRET',
  'GATEWAY_SLACK_BOT_TOKEN',
  'GATEWAY_SLACK_SIGNING_SECRET',
  'GATEWAY_SLACK_APP_TOKEN',
  'GATEWAY_SLACK_CLIENT_SECRET',
  'GATEWAY_TEAMS_APP_PASSWORD',
]

/** Where the chart's defaults differ from the gateway's on purpose (a deployment is production). */
const chartOverrides: Record<string, string> = { NODE_ENV: 'production', GATEWAY_DEMO: 'off' }

interface Values {
  config: Record<string, unknown>
  secret: { env: Record<string, unknown> }
}

interface JsonSchema {
  properties: Record<string, JsonSchema>
  additionalProperties?: boolean
}

const values = parse(await readFile(join(chartDir, 'values.yaml'), 'utf8')) as Values
const schema = JSON.parse(await readFile(join(chartDir, 'values.schema.json'), 'utf8')) as JsonSchema
/** The tests below that render the chart need helm. */
const skip = await helmUnavailable()

/** Secrets a valid production environment needs; the values are test fixtures. */
const fixtureSecrets: Record<string, string> = {
  GATEWAY_JWT_SECRET: 'j'.repeat(40),
  GATEWAY_COOKIE_SECRET: 'c'.repeat(40),
  GATEWAY_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64url'),
  REDIS_URL: 'redis://redis:6379',
}

/** The names a scenario's value files add through `extraEnv`. */
async function extraEnvNames(files: string[]): Promise<string[]> {
  const names: string[] = []
  for (const file of files) {
    const v = parse(await readFile(file, 'utf8')) as { extraEnv?: { name: string }[] } | null
    for (const e of v?.extraEnv ?? []) names.push(e.name)
  }
  return names
}

function asEnv(map: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(map).map(([k, v]) => [k, String(v)]))
}

describe('the chart and the config schema (src/config.ts) agree', () => {
  test('every variable is either in values.yaml `config` or in `secret.env`, and nothing else is', () => {
    const inConfig = Object.keys(values.config)
    const inSecret = Object.keys(values.secret.env)
    assert.deepEqual(inSecret.sort(), [...secretVariables].sort())
    assert.deepEqual(
      inConfig.filter((k) => inSecret.includes(k)),
      [],
      'a variable is in both config and secret.env',
    )
    assert.deepEqual([...inConfig, ...inSecret].sort(), [...configVariables].sort())
  })

  test('values.schema.json lists exactly the same variables and refuses unknown ones', () => {
    const config = schema.properties.config
    const secretEnv = schema.properties.secret?.properties.env
    assert.ok(config && secretEnv)
    assert.deepEqual(Object.keys(config.properties).sort(), Object.keys(values.config).sort())
    assert.deepEqual(Object.keys(secretEnv.properties).sort(), Object.keys(values.secret.env).sort())
    assert.equal(config.additionalProperties, false)
    assert.equal(secretEnv.additionalProperties, false)
    assert.equal(schema.additionalProperties, false)
  })

  test("values.yaml's config values are the gateway's defaults, apart from the production overrides", () => {
    const fromChart = loadConfig({ ...asEnv(values.config), ...fixtureSecrets })
    const fromGateway = loadConfig({ ...chartOverrides, ...fixtureSecrets })
    assert.deepEqual(fromChart.env, fromGateway.env)
    for (const [key, value] of Object.entries(chartOverrides)) assert.equal(values.config[key], value)
  })

  for (const name of Object.keys(scenarios)) {
    test(`the rendered pod environment is one the gateway accepts: ${name}`, { skip }, async () => {
      const manifests = await render(name)
      const container = gatewayContainer(manifests)
      const deployment = only(manifests, 'Deployment').metadata.name
      const configMap = manifests.find((m) => m.kind === 'ConfigMap' && m.metadata.name === deployment)
        ?.data as Record<string, string>
      for (const key of Object.keys(configMap))
        assert.ok(configVariables.includes(key), `ConfigMap has ${key}`)
      // Besides gateway variables: `<secret>_FILE`, the CA bundle, and what the scenario puts in extraEnv.
      const extra = new Set(['NODE_EXTRA_CA_CERTS', ...(await extraEnvNames(scenarios[name] ?? []))])
      for (const v of container.env ?? []) {
        const known =
          configVariables.includes(v.name) ||
          (v.name.endsWith('_FILE') && secretFileVariables.includes(v.name.slice(0, -'_FILE'.length))) ||
          extra.has(v.name)
        assert.ok(known, `env has ${v.name}`)
      }
      // An existing Secret is made outside the chart: stand in for it with valid values.
      const env = podEnvironment(manifests, {
        GATEWAY_COOKIE_SECRET: fixtureSecrets.GATEWAY_COOKIE_SECRET!,
        GATEWAY_ENCRYPTION_KEY: fixtureSecrets.GATEWAY_ENCRYPTION_KEY!,
        REDIS_URL: fixtureSecrets.REDIS_URL!,
      })
      const config = loadConfig(env)
      assert.equal(config.production, true)
      assert.equal(config.demo, false)
    })
  }

  test('the sessions file in ci/ingress-off-values.yaml is one the gateway loads, at the path it is given', {
    skip,
  }, async (t) => {
    const manifests = await render('ingress off, one replica, sessions file')
    const env = podEnvironment(manifests)
    assert.equal(env.GATEWAY_SESSIONS_FILE, '/etc/kasm-runtime-gateway/sessions.yaml')
    const secret = only(manifests, 'Secret').data as Record<string, string>
    const dir = await mkdtemp(join(tmpdir(), 'krg-sessions-'))
    t.after(() => rm(dir, { recursive: true, force: true }))
    // Mounted as sessions.yaml: the extension decides the parser.
    const file = join(dir, 'sessions.yaml')
    await writeFile(file, Buffer.from(secret.GATEWAY_SESSIONS_FILE ?? '', 'base64'))
    const sessions = await loadSessionsFile(file)
    assert.deepEqual(
      sessions.map((s) => [s.kasmId, s.team, s.upstream]),
      [['kasm-0001', 'qa', 'http://10.20.0.15:9434/']],
    )
  })

  test('the check above has teeth: a pod environment the gateway refuses is caught', { skip }, async () => {
    const env = podEnvironment(await render('default'))
    assert.throws(() => loadConfig({ ...env, GATEWAY_ENCRYPTION_KEY: '' }), ConfigError)
    assert.throws(() => loadConfig({ ...env, GATEWAY_COOKIE_SECRET: '' }), ConfigError)
  })
})
