import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { promisify } from 'node:util'
import { parseDocument } from 'yaml'
import { configVariables, loadConfig } from '../../src/config.ts'
import { startGateway } from '../helpers/gateway.ts'
import { root } from './helm.ts'

const run = promisify(execFile)

/**
 * There is no Docker engine here, so `docker compose config` cannot run: these checks read the file the way
 * compose would (YAML with merge keys, `${VAR:-default}` interpolation) and check what it names exists.
 */

const deployDir = join(root, 'deploy')
const text = await readFile(join(deployDir, 'compose.yaml'), 'utf8')
const dockerfile = await readFile(join(deployDir, 'Dockerfile'), 'utf8')

interface Service {
  image?: string
  build?: { context: string; dockerfile: string; target?: string }
  command?: string[]
  environment?: Record<string, string>
  healthcheck?: { test?: string[]; disable?: boolean }
  depends_on?: Record<string, { condition: string }>
  volumes?: string[]
  ports?: string[]
  stop_grace_period?: string
  read_only?: boolean
  cap_drop?: string[]
}

/** Compose's interpolation with the variables unset: `${VAR:-default}` gives the default, `${VAR}` fails. */
function interpolate(value: string): string {
  return value.replace(/\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}/g, (_m, name: string, fallback?: string) => {
    if (fallback === undefined)
      throw new Error(`\${${name}} has no default: \`compose up\` would need it set`)
    return fallback
  })
}

function parseCompose(): Record<string, Service> {
  const doc = parseDocument(text, { merge: true })
  assert.deepEqual(doc.errors, [])
  const compose = doc.toJS() as { services: Record<string, Service> }
  return JSON.parse(interpolate(JSON.stringify(compose.services))) as Record<string, Service>
}

/** Names a file reads as `process.env.X`, `env.X` or `need('X')`. */
function envNamesRead(source: string): Set<string> {
  const names = new Set<string>()
  for (const m of source.matchAll(/(?:process\.env|\benv)\.([A-Z][A-Z0-9_]*)/g)) names.add(m[1]!)
  for (const m of source.matchAll(/need\('([A-Z][A-Z0-9_]*)'\)/g)) names.add(m[1]!)
  return names
}

function seconds(duration: string): number {
  const m = /^(\d+)s$/.exec(duration)
  if (!m) throw new Error(`unexpected duration ${duration}`)
  return Number(m[1])
}

const services = parseCompose()
const built = Object.entries(services).filter(([, s]) => s.build !== undefined)
const gateways = Object.entries(services).filter(([, s]) => s.command === undefined && s.build !== undefined)

describe('deploy/compose.yaml', () => {
  test('parses, and every variable it interpolates has a default so one command brings it up', () => {
    assert.ok(Object.keys(services).length >= 5)
    assert.throws(() => interpolate(`$${'{'}NOPE}`), /has no default/)
  })

  test('two gateway replicas, Redis, the simulated runtime, a registration step and a proxy', () => {
    assert.deepEqual(
      gateways.map(([name]) => name),
      ['gateway-1', 'gateway-2'],
    )
    for (const name of ['redis', 'runtime', 'register', 'proxy']) assert.ok(services[name], name)
  })

  test('locally built images come from deploy/Dockerfile stages that exist; public images are pinned', () => {
    const stages = [...dockerfile.matchAll(/^FROM\s+\S+\s+AS\s+(\S+)/gim)].map((m) => m[1])
    for (const [name, s] of built) {
      assert.equal(s.build?.dockerfile, 'deploy/Dockerfile', name)
      assert.ok(existsSync(join(deployDir, s.build?.context ?? '', s.build?.dockerfile ?? '')), name)
      assert.ok(stages.includes(s.build?.target), `${name}: stage ${s.build?.target}`)
    }
    for (const [name, s] of Object.entries(services).filter(([, s]) => s.build === undefined)) {
      // Not reachable from here: the tag must at least be a specific version, never latest or none.
      assert.match(s.image ?? '', /^[a-z0-9./-]+:\d+(\.\d+)*-alpine$/, `${name} image ${s.image}`)
    }
  })

  test("the gateways' environment names only config variables, and the gateway accepts it", () => {
    for (const [name, s] of gateways) {
      const env = s.environment ?? {}
      for (const key of Object.keys(env)) assert.ok(configVariables.includes(key), `${name}: ${key}`)
      const config = loadConfig(env)
      assert.equal(config.production, true)
      assert.equal(config.demo, false)
      assert.equal(config.env.REDIS_URL, 'redis://redis:6379', 'replicas share Redis')
      assert.ok(services.redis, 'REDIS_URL names the redis service')
      // Docker must let the drain finish before it kills a gateway.
      assert.ok(seconds(s.stop_grace_period ?? '10s') > config.env.GATEWAY_SHUTDOWN_GRACE_MS / 1000)
      assert.equal(s.read_only, true)
      assert.deepEqual(s.cap_drop, ['ALL'])
    }
  })

  test('the runtime and the registration step name only variables their programs read', async () => {
    const runtime = services.runtime!
    assert.deepEqual(runtime.command, ['node', 'dist/dev/runtime-server.js'])
    const runtimeSource = await readFile(join(root, 'src/dev/runtime-server.ts'), 'utf8')
    const runtimeReads = envNamesRead(runtimeSource)
    for (const key of Object.keys(runtime.environment ?? {}))
      assert.ok(runtimeReads.has(key), `runtime: ${key}`)

    const register = services.register!
    assert.deepEqual(register.command, ['node', 'deploy/kasm/register-session.mjs'])
    const registerReads = envNamesRead(await readFile(join(deployDir, 'kasm/register-session.mjs'), 'utf8'))
    for (const key of Object.keys(register.environment ?? {}))
      assert.ok(registerReads.has(key), `register: ${key}`)

    // The session the step registers is the runtime, with the runtime's own token, signed with the gateways' key.
    const env = register.environment ?? {}
    assert.equal(env.MESSAGING_TOKEN, runtime.environment?.KASM_RUNTIME_INBOX_TOKEN)
    assert.equal(env.SESSION_UPSTREAM, `http://runtime:${runtime.environment?.PORT}/`)
    assert.equal(env.KASM_ID, runtime.environment?.KASM_ID)
    const gatewayEnv = services['gateway-1']?.environment ?? {}
    for (const key of ['GATEWAY_JWT_SECRET', 'GATEWAY_JWT_ISSUER', 'GATEWAY_JWT_AUDIENCE'])
      assert.equal(env[key], gatewayEnv[key], key)
    assert.equal(env.GATEWAY_URL, `http://gateway-1:${loadConfig(gatewayEnv).env.PORT}`)
  })

  test('the commands, health checks and mounted files exist in the image or the repository', () => {
    const copied = [...dockerfile.matchAll(/^COPY\s+(?!--from)(\S+)/gm)].map((m) => m[1])
    for (const script of ['deploy/healthcheck.mjs', 'deploy/kasm/register-session.mjs'])
      assert.ok(copied.includes(script), `the Dockerfile copies ${script}`)
    for (const [name, s] of gateways)
      assert.deepEqual(s.healthcheck?.test, ['CMD', 'node', 'deploy/healthcheck.mjs', '/readyz'], name)
    for (const [name, s] of Object.entries(services)) {
      for (const volume of s.volumes ?? []) {
        const source = volume.split(':')[0] ?? ''
        assert.ok(existsSync(join(deployDir, source)), `${name}: ${source}`)
      }
      for (const [dep, { condition }] of Object.entries(s.depends_on ?? {})) {
        assert.ok(services[dep], `${name} depends on ${dep}`)
        if (condition === 'service_healthy')
          assert.ok(services[dep]?.healthcheck?.test, `${dep} has a health check`)
      }
    }
  })

  test('the proxy sends /desktop/<kasm_id>/mcp/ and the console to both replicas, SSE-safe', async () => {
    const conf = await readFile(join(deployDir, 'nginx/demo.conf'), 'utf8')
    const upstream = /upstream kasm_runtime_gateway \{([^}]*)\}/.exec(conf)?.[1] ?? ''
    const servers = [...upstream.matchAll(/server\s+([^;\s]+);/g)].map((m) => m[1])
    assert.deepEqual(
      servers,
      gateways.map(([name]) => `${name}:8080`),
    )
    const location = /location ~ "([^"]+)"/.exec(conf)?.[1]
    assert.ok(location)
    const re = new RegExp(location)
    assert.ok(re.test('/desktop/demo/mcp/events'))
    assert.ok(!re.test('/desktop/demo/vnc/vnc.html'))
    assert.ok(!re.test('/x/desktop/demo/mcp/'))
    for (const block of conf.split('location').filter((b) => b.includes('proxy_pass'))) {
      assert.match(block, /proxy_buffering off;/)
      assert.match(block, /proxy_read_timeout 3600s;/)
      assert.match(block, /proxy_http_version 1\.1;/)
      const body = /client_max_body_size (\d+)m;/.exec(block)
      assert.ok(body && Number(body[1]) * 1024 * 1024 > loadConfig({}).env.GATEWAY_MAX_ATTACHMENT_BYTES)
    }
    assert.match(conf, /location \/admin\/ \{\s*return 404;/)
  })
})

test('deploy/demo-token.mjs makes a bearer the compose gateways accept', async (t) => {
  const env = services['gateway-1']?.environment ?? {}
  const gateway = await startGateway({
    GATEWAY_JWT_SECRET: env.GATEWAY_JWT_SECRET ?? '',
    GATEWAY_JWT_ISSUER: env.GATEWAY_JWT_ISSUER ?? '',
    GATEWAY_JWT_AUDIENCE: env.GATEWAY_JWT_AUDIENCE ?? '',
  })
  t.after(() => gateway.close())
  for (const role of ['operator', 'admin']) {
    // Without GATEWAY_JWT_SECRET set, as after a plain `compose up`.
    const { stdout } = await run(process.execPath, [join(deployDir, 'demo-token.mjs'), role], {
      env: { PATH: process.env.PATH ?? '' },
    })
    const response = await fetch(`${gateway.url}/auth/me`, {
      headers: { authorization: `Bearer ${stdout.trim()}` },
    })
    assert.equal(response.status, 200)
    const me = (await response.json()) as { roles: string[]; teams: string[] }
    assert.deepEqual(me.roles, [role])
    assert.deepEqual(me.teams, ['*'])
  }
})
