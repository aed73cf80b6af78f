import assert from 'node:assert/strict'
import { writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { addRuntimeSession, fastEventEnv, until } from '../events/helpers.ts'
import { startGateway } from '../helpers/gateway.ts'
import { testEnv } from '../helpers/jwt.ts'
import { startReceiver } from './receiver.ts'

/** Which sessions are watched for notifications, the boot's refusals, and the notify file's reload on SIGHUP. */

const SECRET = 'webhook-secret-for-tests-0123456789'
let files = 0

async function notifyFile(content: string, ext = 'yaml'): Promise<string> {
  const path = join(tmpdir(), `notify-${process.pid}-${Date.now()}-${files++}.${ext}`)
  await writeFile(path, content)
  return path
}

/** The boot error of a gateway with `env`. */
async function bootError(env: Record<string, string>): Promise<string> {
  try {
    const app = await buildApp(loadConfig(testEnv(env)))
    await app.close()
  } catch (err) {
    return (err as Error).message
  }
  throw new Error('the gateway booted')
}

test('a webhook URL the URL policy refuses stops the boot, naming the variable or the file entry', async () => {
  // Loopback is refused unless GATEWAY_UPSTREAM_ALLOW lists it, as for admin-registered upstreams.
  const global = await bootError({
    GATEWAY_UPSTREAM_ALLOW: '',
    GATEWAY_NOTIFY_URL: 'http://127.0.0.1:9/hook',
  })
  assert.match(global, /GATEWAY_NOTIFY_URL\[0\]: host 127\.0\.0\.1 resolves to a loopback address/)
  const listed = await bootError({
    GATEWAY_UPSTREAM_ALLOW: 'hooks.example.com',
    GATEWAY_NOTIFY_URL: 'https://hooks.example.com/a,http://169.254.169.254/latest',
  })
  assert.match(listed, /GATEWAY_NOTIFY_URL\[1\]: host 169\.254\.169\.254 is not in GATEWAY_UPSTREAM_ALLOW/)
  assert.doesNotMatch(listed, /\[0\]/)
  const file = await notifyFile('teams:\n  red:\n    - url: http://[::1]:9/hook\n')
  const entry = await bootError({ GATEWAY_UPSTREAM_ALLOW: '', GATEWAY_NOTIFY_FILE: file })
  assert.match(
    entry,
    /GATEWAY_NOTIFY_FILE \(.*\): teams\."red"\[0\]\.url: host ::1 resolves to a loopback address/,
  )
  // The deployer allows loopback explicitly: the same file boots.
  const app = await buildApp(
    loadConfig(testEnv({ GATEWAY_UPSTREAM_ALLOW: '::1/128', GATEWAY_NOTIFY_FILE: file })),
  )
  await app.close()
})

test('a webhook URL listed twice for the same teams stops the boot, naming both entries, never the URL', async () => {
  const twice = await bootError({
    GATEWAY_NOTIFY_URL:
      'https://hooks.example/a/key-one,https://hooks.example/b,https://hooks.example/a/key-one',
  })
  assert.match(twice, /GATEWAY_NOTIFY_URL\[2\]: the same URL as \[0\]/)
  assert.doesNotMatch(twice, /\[1\]|key-one/)
  const file = await notifyFile(
    'teams:\n  red:\n    - url: https://hooks.example/a\n    - url: https://hooks.example/a\n  blue:\n    - url: https://hooks.example/a\n',
  )
  const entry = await bootError({ GATEWAY_NOTIFY_FILE: file })
  assert.match(entry, /teams\."red"\[1\]\.url: the same URL as \[0\]/)
  assert.doesNotMatch(entry, /blue/, 'another team may use the same URL')
  // Two URLs on one host are two targets: they boot.
  const app = await buildApp(
    loadConfig(testEnv({ GATEWAY_NOTIFY_URL: 'https://hooks.example/a,https://hooks.example/b' })),
  )
  assert.deepEqual(
    app.notifications?.routes().global.map((t) => t.label),
    ['hooks.example#0', 'hooks.example#1'],
  )
  await app.close()
})

test('a bad notify file stops the boot, naming the entries and never quoting a secret', async () => {
  const yaml = await notifyFile(
    'teams:\n  red: [ {url: "http://a.test/", secret: "s3cr3t-value-of-sixteen"\n',
  )
  const broken = await bootError({ GATEWAY_NOTIFY_FILE: yaml })
  assert.match(broken, /GATEWAY_NOTIFY_FILE \(.*\): invalid YAML \(.*\) at line \d+, column \d+/)
  assert.doesNotMatch(broken, /s3cr3t/)
  const entries = await notifyFile(
    JSON.stringify({
      teams: {
        red: [
          { url: 'ftp://a.test/', format: 'xml' },
          { secret: 'short' },
          { url: 'http://a.test/', extra: 1 },
        ],
        blue: 'http://b.test/',
      },
    }),
    'json',
  )
  const bad = await bootError({ GATEWAY_NOTIFY_FILE: entries })
  assert.match(bad, /teams\."red"\[0\]: url: must be an http\(s\) URL; format: Invalid enum value/)
  assert.match(bad, /teams\."red"\[1\]: url: is required; secret: must be at least 16 characters/)
  assert.match(bad, /teams\."red"\[2\]: Unrecognized key\(s\) in object: 'extra'/)
  assert.match(bad, /teams\."blue": must be a list of targets/)
  assert.doesNotMatch(bad, /short/)
  const top = await bootError({ GATEWAY_NOTIFY_FILE: await notifyFile('routes: {}\n') })
  assert.match(
    top,
    /GATEWAY_NOTIFY_FILE \(.*\): teams: is required; Unrecognized key\(s\) in object: 'routes'/,
  )
  const missing = await bootError({ GATEWAY_NOTIFY_FILE: join(tmpdir(), 'no-such-notify-file.yaml') })
  assert.match(missing, /GATEWAY_NOTIFY_FILE \(.*\): cannot read the file \(ENOENT\)/)
  assert.throws(
    () => loadConfig(testEnv({ GATEWAY_NOTIFY_URL: 'hooks.example.com' })),
    /GATEWAY_NOTIFY_URL\.0: each must be/,
  )
  assert.throws(() => loadConfig(testEnv({ GATEWAY_NOTIFY_FORMAT: 'xml' })), /GATEWAY_NOTIFY_FORMAT/)
  assert.throws(
    () => loadConfig(testEnv({ GATEWAY_NOTIFY_SECRET: 'short' })),
    /GATEWAY_NOTIFY_SECRET: must be at least 16/,
  )
})

test('only sessions with a route are watched; SIGHUP reloads the notify file, a bad one keeps the routes', async (t) => {
  const rx = await startReceiver(SECRET)
  t.after(() => rx.close())
  const file = await notifyFile(`teams:\n  red:\n    - url: ${rx.url}\n`)
  const gw = await startGateway({
    ...fastEventEnv,
    GATEWAY_NOTIFY_FILE: file,
    GATEWAY_NOTIFY_SECRET: SECRET,
    GATEWAY_NOTIFY_RETRY_MS: '20',
  })
  t.after(() => gw.close())
  const rt = await addRuntimeSession(t, gw.app, 's1')
  const notifications = gw.app.notifications
  assert.ok(notifications)
  // Team blue has no route: its session is not read for notifications.
  assert.equal(notifications.watcher.watched, 0)
  assert.equal(rt.openEventStreams, 0)

  const reloads = async (outcome: string) => {
    const text = await (await fetch(`${gw.url}/metrics`)).text()
    return Number(
      new RegExp(`krg_notify_file_reloads_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0,
    )
  }
  await writeFile(file, `teams:\n  blue:\n    - url: ${rx.url}\n`)
  process.emit('SIGHUP')
  await until('the reload applied', async () => (await reloads('applied')) === 1)
  await until('s1 read with no viewer', () => rt.openEventStreams === 1)
  assert.equal(notifications.watcher.watched, 1)
  rt.ask({ title: 'After the reload', fields: [{ id: 'x', type: 'string' }] })
  await until('request.opened', () => rx.of('request.opened').length === 1)
  assert.ok(rx.received[0]?.signed)

  // A broken file is refused and logged; the routes stay as they were.
  await writeFile(file, 'teams: [oops\n')
  process.emit('SIGHUP')
  await until('the reload refused', async () => (await reloads('failed')) === 1)
  assert.equal(notifications.watcher.watched, 1)
  rt.escalate('still routed')
  await until('escalation.started', () => rx.of('escalation.started').length === 1)

  // Removing the route stops the watch (and with it the unviewed reader).
  await writeFile(file, 'teams: {}\n')
  process.emit('SIGHUP')
  await until('the second reload applied', async () => (await reloads('applied')) === 2)
  await until('s1 no longer read', () => rt.openEventStreams === 0)
  assert.equal(notifications.watcher.watched, 0)
})
