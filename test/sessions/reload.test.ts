import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { startGateway } from '../helpers/gateway.ts'
import { captureLogs, waitFor } from './capture-logs.ts'

const yaml = (entries: string[]) => `sessions:\n${entries.map((e) => `  - ${e}\n`).join('')}`

test('SIGHUP reloads the sessions file as a set; admin sessions untouched; a bad file keeps the old set', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-reload-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'sessions.yaml')
  const tokenFile = join(dir, 'k2.token')
  await writeFile(tokenFile, 'tok-2\n')
  await writeFile(
    file,
    yaml([
      '{kasmId: k1, upstream: "http://a:9434/", messagingToken: tok-1, team: blue}',
      '{kasmId: k2, upstream: "http://b:9434/", messagingTokenFile: k2.token, team: blue}',
      '{kasmId: k3, upstream: "http://c:9434/", messagingToken: tok-3, team: blue}',
      '{kasmId: k4, upstream: "http://d:9434/", messagingToken: tok-4, team: blue}',
    ]),
  )
  // Other gateways of the process may come and go meanwhile: this gateway's own listener is the one followed.
  const listenersBefore = new Set(process.listeners('SIGHUP'))
  const logs = captureLogs()
  const gw = await startGateway({ GATEWAY_SESSIONS_FILE: file }, { logger: logs.logger })
  let closed = false
  t.after(async () => {
    if (!closed) await gw.close()
  })
  const installed = process.listeners('SIGHUP').filter((l) => !listenersBefore.has(l))
  assert.equal(installed.length, 1)
  const sessions = gw.app.sessions
  await sessions.put({
    kasmId: 'adm',
    upstream: 'http://adm/',
    team: 'blue',
    messagingToken: 'tok-adm',
    source: 'admin',
  })

  const heard: string[] = []
  sessions.onChange((kasmId) => heard.push(kasmId))
  const versions = async () =>
    Object.fromEntries(
      (await sessions.list()).map((v) => [v.kasmId, `${v.source}:${v.team}:${v.upstream}:v${v.version}`]),
    )
  const applied = () => logs.records().filter((r) => r.msg === 'sessions file applied').length

  // k1 rotated, k2 unchanged, k3 moves to another upstream, k4 changes team only, k5 added, adm listed (shadowed)
  await writeFile(
    file,
    yaml([
      '{kasmId: k1, upstream: "http://a:9434/", messagingToken: tok-1-rotated, team: blue}',
      '{kasmId: k2, upstream: "http://b:9434/", messagingTokenFile: k2.token, team: blue}',
      '{kasmId: k3, upstream: "http://c2:9434/", messagingToken: tok-3, team: blue}',
      '{kasmId: k4, upstream: "http://d:9434/", messagingToken: tok-4, team: red}',
      '{kasmId: k5, upstream: "http://e:9434/", messagingToken: tok-5, team: blue}',
      '{kasmId: adm, upstream: "http://evil/", messagingToken: tok-x, team: red}',
    ]),
  )
  process.emit('SIGHUP', 'SIGHUP')
  await waitFor('first reload', () => applied() === 2)
  assert.deepEqual(await versions(), {
    adm: 'admin:blue:http://adm/:v1',
    k1: 'file:blue:http://a:9434/:v2',
    k2: 'file:blue:http://b:9434/:v1',
    k3: 'file:blue:http://c2:9434/:v2',
    k4: 'file:red:http://d:9434/:v1',
    k5: 'file:blue:http://e:9434/:v1',
  })
  assert.equal((await sessions.get('k1'))?.messagingToken.reveal(), 'tok-1-rotated')
  assert.equal((await sessions.get('adm'))?.messagingToken.reveal(), 'tok-adm')
  assert.deepEqual([...heard].sort(), ['k1', 'k3', 'k4', 'k5'])
  const warning = logs.records().find((r) => r.msg?.toString().startsWith('sessions file entries ignored'))
  assert.deepEqual(warning?.shadowed, ['adm'])

  // The mounted secret changes and a real signal arrives: k2 rotates; k3, k4, k5 removed from the file.
  heard.length = 0
  await writeFile(tokenFile, 'tok-2-rotated\n')
  await writeFile(
    file,
    yaml([
      '{kasmId: k1, upstream: "http://a:9434/", messagingToken: tok-1-rotated, team: blue}',
      '{kasmId: k2, upstream: "http://b:9434/", messagingTokenFile: k2.token, team: blue}',
    ]),
  )
  process.kill(process.pid, 'SIGHUP')
  await waitFor('second reload', () => applied() === 3)
  assert.deepEqual(await versions(), {
    adm: 'admin:blue:http://adm/:v1',
    k1: 'file:blue:http://a:9434/:v2',
    k2: 'file:blue:http://b:9434/:v2',
  })
  assert.equal((await sessions.get('k2'))?.messagingToken.reveal(), 'tok-2-rotated')
  assert.deepEqual([...heard].sort(), ['k2', 'k3', 'k4', 'k5'])

  // A bad file (its second entry invalid, its first a change) is refused whole: nothing applied.
  heard.length = 0
  const before = await versions()
  await writeFile(
    file,
    yaml([
      '{kasmId: k1, upstream: "http://a:9434/", messagingToken: tok-new, team: blue}',
      '{kasmId: k2, upstream: "http://b:9434/?token=leak", messagingToken: tok-bad-entry, team: blue}',
    ]),
  )
  process.emit('SIGHUP', 'SIGHUP')
  await waitFor('failed reload logged', () => logs.text().includes('sessions file reload failed'))
  const failure = logs
    .records()
    .find((r) => r.msg === 'sessions file reload failed; keeping the previous sessions')
  assert.equal(failure?.level, 50)
  assert.match(String(failure?.reason), /sessions\[1\] \(kasmId "k2"\): upstream: must not have a query/)
  assert.deepEqual(await versions(), before)
  assert.equal((await sessions.get('k1'))?.messagingToken.reveal(), 'tok-1-rotated')
  assert.deepEqual(heard, [])

  const metrics = await (await fetch(`${gw.url}/metrics`)).text()
  assert.match(metrics, /krg_sessions_file_reloads_total\{outcome="applied"\} 2/)
  assert.match(metrics, /krg_sessions_file_reloads_total\{outcome="failed"\} 1/)
  const ready = (await (await fetch(`${gw.url}/readyz`)).json()) as { checks: Record<string, string> }
  assert.equal(ready.checks.sessions, 'ok', 'a failed reload keeps the replica ready with the old set')

  const text = logs.text()
  for (const token of ['tok-1', 'tok-2', 'tok-3', 'tok-adm', 'tok-new', 'tok-bad-entry', 'tok-x'])
    assert.ok(!text.includes(token), `${token} appears in the logs`)

  closed = true
  await gw.close()
  assert.ok(
    !process.listeners('SIGHUP').includes(installed[0] as NodeJS.SignalsListener),
    'the SIGHUP listener outlives the app',
  )
})

test('without a sessions file, no SIGHUP listener is installed', async (t) => {
  const before = new Set(process.listeners('SIGHUP'))
  const gw = await startGateway()
  t.after(() => gw.close())
  assert.deepEqual(
    process.listeners('SIGHUP').filter((l) => !before.has(l)),
    [],
  )
  assert.deepEqual(await gw.app.sessions.list(), [])
})
