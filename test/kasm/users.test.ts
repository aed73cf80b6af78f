import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import type { AuditRecord } from '../../src/audit/types.ts'
import { ConfigError } from '../../src/config.ts'
import { loadLaunchPolicy } from '../../src/kasm/teams.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor as until } from '../helpers/wait.ts'
import { GATEWAY_USER, kasmEnv, kasmSetup } from './helpers.ts'

/**
 * Issue 24: who a launched session belongs to in Kasm. The viewer link Kasm answers carries Kasm's session token
 * for the session's user, so a team admin must never launch as a Kasm user the team was not given.
 */

const BLUE_USER = 'b10e0000000000000000000000000001'
const ALICE = 'a11ce000-0000-4000-8000-000000000002'
const KASM_ADMIN = 'ad000000000000000000000000000003'

async function teamsFile(t: TestContext, content: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-teams-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'teams.yaml')
  await writeFile(file, content)
  return file
}

const BLUE_ONLY = `teams:\n  blue:\n    kasmUserId: ${BLUE_USER}\n    userIds: [${ALICE}]\n`

test("a launch runs as the team's Kasm user; a chosen user_id only when the team may choose it", async (t) => {
  const file = await teamsFile(t, BLUE_ONLY)
  const { kasm, call } = await kasmSetup(t, { env: { GATEWAY_KASM_TEAMS_FILE: file } })
  const blueAdmin = await bearer({ sub: 'bo', roles: ['admin'], teams: ['blue'] })
  const launch = (body: Record<string, unknown>, token?: string) =>
    call('POST', '/admin/sessions', { body: { image: 'Chrome', ...body }, ...(token ? { token } : {}) })
  const requestedFor = () => [...kasm.sessions.values()].map((s) => s.requestedUserId)

  const own = await launch({ team: 'blue' }, blueAdmin)
  assert.equal(own.status, 201, own.text)
  assert.equal(own.body.kasmUserId, BLUE_USER)
  assert.match(String(own.body.viewerUrl), new RegExp(`/#/connect/kasm/${own.body.kasmId}/${BLUE_USER}/`))
  // Chosen from the team's list, in another spelling (no dashes, upper case): sent as the file spells it.
  const chosen = await launch({ team: 'blue', user_id: ALICE.replaceAll('-', '').toUpperCase() }, blueAdmin)
  assert.equal(chosen.status, 201, chosen.text)
  assert.equal(chosen.body.kasmUserId, ALICE)
  // A team without an entry runs as GATEWAY_KASM_USER_ID.
  const red = await launch({ team: 'red' })
  assert.equal(red.status, 201, red.text)
  assert.equal(red.body.kasmUserId, GATEWAY_USER)
  assert.deepEqual(requestedFor(), [BLUE_USER, ALICE, GATEWAY_USER])

  const refused: [string, Record<string, unknown>, string | undefined][] = [
    ["a Kasm administrator's id", { team: 'blue', user_id: KASM_ADMIN }, blueAdmin],
    ["another team's user", { team: 'red', user_id: ALICE }, undefined],
    ['the default user, for a team with its own', { team: 'blue', user_id: GATEWAY_USER }, blueAdmin],
    ['any id, by an admin of every team', { team: 'blue', user_id: KASM_ADMIN }, undefined],
  ]
  for (const [name, body, token] of refused) {
    const res = await launch(body, token)
    assert.deepEqual([res.status, res.body.error], [403, 'kasm_user_refused'], `${name}: ${res.text}`)
    assert.match(
      String(res.body.message),
      new RegExp(
        `^user_id: team ${body.team}'s admins may not launch sessions as Kasm user ${body.user_id} `,
      ),
      name,
    )
    assert.equal(res.body.viewerUrl, undefined)
  }
  assert.equal(kasm.calls.filter((c) => c.call === 'request_kasm').length, 3, 'Kasm was never asked')
  assert.deepEqual(requestedFor(), [BLUE_USER, ALICE, GATEWAY_USER])

  // The refusals are in the team's audit, for its admins to see.
  const audit = (await call('GET', '/admin/audit?sub=bo', { token: blueAdmin })).body.records as AuditRecord[]
  assert.deepEqual(
    audit.filter((r) => r.outcome === 'refused').map((r) => [r.action, r.status, r.error, r.team]),
    [
      ['launch', 403, 'kasm_user_refused', 'blue'],
      ['launch', 403, 'kasm_user_refused', 'blue'],
    ],
  )
})

test('without a Kasm user for the team, a launch is refused (501) before Kasm is asked', async (t) => {
  const { kasm, call, logs } = await kasmSetup(t, { env: { GATEWAY_KASM_USER_ID: '' } })
  const res = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.deepEqual([res.status, res.body.error], [501, 'kasm_user_not_configured'], res.text)
  assert.match(String(res.body.message), /team blue's sessions as: set GATEWAY_KASM_USER_ID, or kasmUserId/)
  const chosen = await call('POST', '/admin/sessions', {
    body: { image: 'Chrome', team: 'blue', user_id: ALICE },
  })
  assert.deepEqual([chosen.status, chosen.body.error], [403, 'kasm_user_refused'])
  assert.deepEqual(kasm.calls, [])
  assert.match(logs.text(), /launches are refused for teams without a kasmUserId/)
})

test('a Kasm that starts the session for another user: destroyed, no viewer link, nothing registered', async (t) => {
  const { kasm, gw, call } = await kasmSetup(t, { kasm: { launchAs: KASM_ADMIN } })
  const res = await call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue' } })
  assert.deepEqual([res.status, res.body.error], [502, 'kasm_bad_answer'], res.text)
  assert.match(String(res.body.message), /a session of another Kasm user than the one asked for/)
  assert.equal(res.body.viewerUrl, undefined)
  assert.deepEqual(
    kasm.calls.map((c) => c.call),
    ['get_images', 'request_kasm', 'destroy_kasm'],
  )
  assert.equal(kasm.sessions.size, 0, 'destroyed in Kasm')
  assert.deepEqual(await gw.app.sessions.list(), [])
})

test('the teams file: refused at boot naming the entry; SIGHUP applies a new one, keeps the old on a bad one', async (t) => {
  const bad: [string, RegExp][] = [
    ['teams: {blue: {kasmUserId: "../x"}}', /teams\.blue\.kasmUserId: must be a Kasm user id/],
    ['teams: {blue: {users: []}}', /teams\.blue: Unrecognized key\(s\) in object: 'users'/],
    [
      'teams: {blue: {environment: [LD_PRELOAD]}}',
      /teams\.blue\.environment\.0: LD_PRELOAD changes what code/,
    ],
    [
      'teams: {"*": {environment: [kasm_runtime_inbox_token]}}',
      /teams\.\*\.environment\.0: kasm_runtime_inbox_token configures the session runtime/,
    ],
    [
      'teams: {blue: {environment: ["A B"]}}',
      /teams\.blue\.environment\.0: must be an environment variable name/,
    ],
    ['sessions: []', /teams: is required; Unrecognized key\(s\) in object: 'sessions'/],
    ['teams: [', /invalid YAML/],
  ]
  for (const [content, message] of bad) {
    const file = await teamsFile(t, content)
    await assert.rejects(loadLaunchPolicy(file, undefined), (err: Error) => {
      assert.ok(err instanceof ConfigError, content)
      assert.match(err.message, new RegExp(`^GATEWAY_KASM_TEAMS_FILE \\(${file}\\): `), content)
      assert.match(err.message, message, content)
      return true
    })
  }
  await assert.rejects(
    loadLaunchPolicy('/nonexistent/teams.yaml', undefined),
    /cannot read the file \(ENOENT\)/,
  )
  // The gateway does not boot with a bad one.
  const { startFakeKasm } = await import('../fixtures/kasm-api.ts')
  const fake = await startFakeKasm({ auth: 'body' })
  t.after(() => fake.close())
  const broken = await teamsFile(t, 'teams: {blue: {environment: [NODE_OPTIONS]}}')
  await assert.rejects(
    startGateway({ ...kasmEnv(fake, 9, 'body'), GATEWAY_KASM_TEAMS_FILE: broken }),
    (err: Error) => err instanceof ConfigError && /NODE_OPTIONS changes what code/.test(err.message),
  )

  const file = await teamsFile(t, BLUE_ONLY)
  const { call, logs } = await kasmSetup(t, { env: { GATEWAY_KASM_TEAMS_FILE: file } })
  const applied = () =>
    logs
      .text()
      .split('\n')
      .filter((l) => l.includes('Kasm teams file applied')).length
  assert.equal(applied(), 1)
  const asKasmAdmin = () =>
    call('POST', '/admin/sessions', { body: { image: 'Chrome', team: 'blue', user_id: KASM_ADMIN } })
  assert.equal((await asKasmAdmin()).status, 403)
  await writeFile(file, `teams:\n  blue:\n    kasmUserId: ${BLUE_USER}\n    userIds: [${KASM_ADMIN}]\n`)
  process.emit('SIGHUP')
  await until('the new teams file applied', () => applied() === 2)
  assert.equal((await asKasmAdmin()).status, 201)
  await writeFile(file, 'teams: {blue: {userIds: 7}}')
  process.emit('SIGHUP')
  await until('the bad file refused', () => logs.text().includes('Kasm teams file reload failed'))
  assert.match(logs.text(), /teams\.blue\.userIds: must be a list/)
  assert.equal((await asKasmAdmin()).status, 201, 'the previous rules stay')
})
