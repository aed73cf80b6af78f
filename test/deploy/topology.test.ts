import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { parseDocument } from 'yaml'
import { freePort, killAll } from '../cluster/redis-harness.ts'
import { startNginx } from '../helpers/nginx.ts'
import { childEnv, TS_CHILD_FLAGS } from '../helpers/server-process.ts'
import { BOOT_MS, WAIT_MS, waitFor } from '../helpers/wait.ts'
import { root } from './helm.ts'

/**
 * deploy/compose.yaml without Docker: the same processes on loopback, configured from the compose file itself,
 * behind a real nginx running deploy/nginx/demo.conf (its host names pointed at loopback ports). Needs the
 * `nginx` binary (Debian package nginx-light) and Redis (REDIS_TEST_URL).
 */

const run = promisify(execFile)
const REDIS = process.env.REDIS_TEST_URL ?? 'redis://127.0.0.1:6379'

interface Service {
  environment?: Record<string, string>
}

async function composeServices(): Promise<Record<string, Service>> {
  const text = await readFile(join(root, 'deploy/compose.yaml'), 'utf8')
  // The demo defaults of `${VAR:-default}`, as `compose up` with nothing set.
  const interpolated = text.replace(/\$\{[A-Z0-9_]+:-([^}]*)\}/g, '$1')
  return (parseDocument(interpolated, { merge: true }).toJS() as { services: Record<string, Service> })
    .services
}

/** Starts a process, resolves with the first group of the first output line matching `ready`. */
function start(
  children: ChildProcess[],
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: ChildProcess; match: string }> {
  const child = spawn(process.execPath, args, {
    cwd: root,
    // Load is not what this test checks: a loaded machine must not make a gateway shed (as testEnv says).
    env: childEnv({ GATEWAY_OVERLOAD_LOOP_DELAY_MS: '0', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(child)
  return new Promise((resolve, reject) => {
    let seen = ''
    const timer = setTimeout(
      () => reject(new Error(`${args.join(' ')} not ready in ${BOOT_MS} ms:\n${seen}`)),
      BOOT_MS,
    )
    timer.unref()
    const onData = (chunk: Buffer) => {
      seen += chunk.toString()
      const m = ready.exec(seen)
      if (m?.[1]) {
        clearTimeout(timer)
        resolve({ child, match: m[1] })
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}:\n${seen}`)))
  })
}

/** Reads an SSE response until `needle` appears (or throws after a generous deadline). */
async function readUntil(response: Response, needle: string): Promise<string> {
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ''
  const deadline = Date.now() + WAIT_MS
  while (!text.includes(needle)) {
    if (Date.now() > deadline) throw new Error(`no ${needle} in ${text}`)
    const { value, done } = await reader.read()
    if (done) throw new Error(`stream ended before ${needle}: ${text}`)
    text += decoder.decode(value, { stream: true })
  }
  await reader.cancel()
  return text
}

test('the compose topology: a proxy routes /desktop/<id>/mcp/ to two replicas sharing Redis', async (t) => {
  const services = await composeServices()
  const children: ChildProcess[] = []
  const dir = await mkdtemp(join(tmpdir(), 'krg-topology-'))
  const prefix = `krg-topology-${randomBytes(4).toString('hex')}:`
  t.after(async () => {
    await killAll(children)
    const redis = new Redis(REDIS, { maxRetriesPerRequest: 1 })
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
    await rm(dir, { recursive: true, force: true })
  })

  // The session (the simulated runtime) and two gateways, started together, with exactly the compose file's
  // environment but for Redis and ports, and loopback allowed for the runtime (in compose it is the `runtime`
  // service's private address, which the URL policy allows anyway).
  const runtimeEnv = services.runtime?.environment ?? {}
  const gatewayEnv = (name: string) => ({
    ...(services[name]?.environment ?? {}),
    GATEWAY_UPSTREAM_ALLOW: '127.0.0.0/8',
    REDIS_URL: REDIS,
    GATEWAY_REDIS_PREFIX: prefix,
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    GATEWAY_SHUTDOWN_GRACE_MS: '10000',
  })
  const listening = /listening at http:\/\/127\.0\.0\.1:(\d+)/
  const [runtime, ...started] = await Promise.all([
    start(
      children,
      [...TS_CHILD_FLAGS, 'src/dev/runtime-server.ts'],
      { ...runtimeEnv, HOST: '127.0.0.1', PORT: '0' },
      /listening at (http:\/\/\S+)/,
    ),
    start(children, [...TS_CHILD_FLAGS, 'src/server.ts'], gatewayEnv('gateway-1'), listening),
    start(children, [...TS_CHILD_FLAGS, 'src/server.ts'], gatewayEnv('gateway-2'), listening),
  ])
  const gateways = started.map((g) => ({ child: g.child, port: Number(g.match) }))

  // The proxy: deploy/nginx/demo.conf as shipped, its upstream names and listen port pointed at loopback.
  const proxyPort = await freePort()
  const demo = (await readFile(join(root, 'deploy/nginx/demo.conf'), 'utf8'))
    .replace('server gateway-1:8080;', `server 127.0.0.1:${gateways[0]!.port};`)
    .replace('server gateway-2:8080;', `server 127.0.0.1:${gateways[1]!.port};`)
    .replace('listen 8080;', `listen 127.0.0.1:${proxyPort};`)
  await writeFile(join(dir, 'demo.conf'), demo)
  await writeFile(
    join(dir, 'nginx.conf'),
    [
      'daemon off;',
      'master_process off;',
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/error.log;`,
      'events {}',
      'http {',
      '  access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((p) => `  ${p}_temp_path ${dir}/${p};`),
      `  include ${dir}/demo.conf;`,
      '}',
    ].join('\n'),
  )
  children.push(await startNginx(dir, join(dir, 'nginx.conf')))
  const proxy = `http://127.0.0.1:${proxyPort}`
  await waitFor('nginx to answer', () =>
    fetch(`${proxy}/healthz`).then(
      (r) => r.ok,
      () => false,
    ),
  )

  // The orchestrator's step, with the compose file's environment, against the first replica.
  const registerEnv = {
    ...(services.register?.environment ?? {}),
    GATEWAY_URL: `http://127.0.0.1:${gateways[0]!.port}`,
    SESSION_UPSTREAM: runtime.match,
  }
  const registered = await run(process.execPath, ['deploy/kasm/register-session.mjs'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...registerEnv },
  })
  assert.equal((JSON.parse(registered.stdout) as { kasmId: string }).kasmId, 'demo')

  const operator = (await run(process.execPath, ['deploy/demo-token.mjs'], { cwd: root })).stdout.trim()
  const auth = { authorization: `Bearer ${operator}` }

  // The other replica knows the session through Redis; the proxy may send a request to either.
  const direct = await fetch(`http://127.0.0.1:${gateways[1]!.port}/desktop/demo/mcp/inbox`, {
    headers: auth,
  })
  assert.equal(direct.status, 200, await direct.text())
  for (let i = 0; i < 4; i++) {
    const response = await fetch(`${proxy}/desktop/demo/mcp/inbox`, { headers: auth })
    assert.equal(response.status, 200)
    assert.ok(typeof ((await response.json()) as { run?: string }).run === 'string')
  }

  // Events stream through the proxy unbuffered: the first event arrives while the stream stays open.
  const stream = await fetch(`${proxy}/desktop/demo/mcp/events`, { headers: auth })
  assert.equal(stream.status, 200)
  assert.match(stream.headers.get('content-type') ?? '', /text\/event-stream/)
  assert.match(await readUntil(stream, 'event: info'), /id: run-[^:]+:1/)

  // The rest of /desktop/ is Kasm's; the admin API and metrics are not public; the console is.
  const viewer = await fetch(`${proxy}/desktop/demo/vnc/vnc.html`)
  assert.equal(viewer.status, 404)
  assert.match(await viewer.text(), /Kasm's own proxy serves this path/)
  const admin = (await run(process.execPath, ['deploy/demo-token.mjs', 'admin'], { cwd: root })).stdout.trim()
  const adminResponse = await fetch(`${proxy}/admin/sessions`, {
    headers: { authorization: `Bearer ${admin}` },
  })
  await adminResponse.body?.cancel()
  assert.equal(adminResponse.status, 404)
  assert.equal((await fetch(`${proxy}/metrics`)).status, 404)
  const consolePage = await fetch(`${proxy}/`, { headers: auth })
  assert.equal(consolePage.status, 200)
  assert.match(consolePage.headers.get('content-type') ?? '', /text\/html/)
  await consolePage.body?.cancel()

  // A replica stopped with SIGTERM drains and exits 0; the proxy keeps serving from the other one.
  const first = gateways[0]!.child
  const exited = new Promise<number | null>((resolve) => first.once('exit', (code) => resolve(code)))
  first.kill('SIGTERM')
  assert.equal(await exited, 0)
  for (let i = 0; i < 4; i++) {
    const response = await fetch(`${proxy}/desktop/demo/mcp/inbox`, { headers: auth })
    await response.body?.cancel()
    assert.equal(response.status, 200)
  }
})
