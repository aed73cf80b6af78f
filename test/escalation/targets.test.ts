import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { makePlan, plannedTargets } from '../../src/escalation/plan.ts'
import {
  type ChatTarget,
  loadNotifyFile,
  PAGERDUTY_EVENTS_URL,
  type PersonTarget,
} from '../../src/notify/targets.ts'
import { testEnv } from '../helpers/jwt.ts'

/** The notify file's `after_s`, `person:` and `pagerduty:` entries: what is accepted, and every refusal. */

const KEY = 'pd-routing-key-0123456789abcdef'
const env = loadConfig(testEnv()).env

async function notifyFile(blue: unknown[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-targets-'))
  await writeFile(join(dir, 'pd-key'), `${KEY}\n`)
  await writeFile(join(dir, 'spaced-key'), 'has a space in it\n')
  const file = join(dir, 'notify.json')
  await writeFile(file, JSON.stringify({ teams: { blue } }))
  return file
}

test('after_s on every kind, people and pagers: parsed into the plan of a team', async () => {
  const people = new Map<string, PersonTarget[]>()
  const chat = new Map<string, ChatTarget[]>()
  const file = await notifyFile([
    { url: 'https://hooks.example/a' },
    { person: 'olivia', after_s: 60 },
    { pagerduty: { routingKeyFile: 'pd-key' }, after_s: 150 },
    { pagerduty: { routingKey: KEY, url: 'https://api.opsgenie.example/v1/json/pagerduty' }, after_s: 150 },
    { url: 'https://hooks.example/b', after_s: 600 },
  ])
  const teams = await loadNotifyFile(file, env, chat, people)
  const webhooks = teams.get('blue') ?? []
  assert.deepEqual(
    webhooks.map((t) => [t.label, t.format, t.afterS, t.url]),
    [
      ['team:blue#0', 'json', 0, 'https://hooks.example/a'],
      ['team:blue#2', 'pagerduty', 150, PAGERDUTY_EVENTS_URL],
      ['team:blue#3', 'pagerduty', 150, 'https://api.opsgenie.example/v1/json/pagerduty'],
      ['team:blue#4', 'json', 600, 'https://hooks.example/b'],
    ],
  )
  assert.equal(webhooks[1]?.routingKey?.reveal(), KEY, 'read from its file, the newline dropped')
  assert.ok(!JSON.stringify(webhooks).includes(KEY), 'the routing key never serialises')
  assert.deepEqual(people.get('blue'), [{ sub: 'olivia', label: 'person:olivia', afterS: 60 }])

  const routes = { global: [], teams, chat, people }
  const plan = makePlan(plannedTargets(routes, 'blue', false), {
    run: 'r1',
    item: 'q1',
    seq: 3,
    openedAt: Date.parse('2026-12-06T10:00:00Z'),
    deadline: '2026-12-06T10:05:00Z',
  })
  assert.deepEqual(
    plan.steps.map((s) => [s.step, s.afterS, s.state, s.targets.map((t) => `${t.kind} ${t.label}`)]),
    [
      [0, 0, 'due', ['webhook team:blue#0']],
      [1, 60, 'due', ['person person:olivia']],
      [2, 150, 'due', ['pagerduty team:blue#2', 'pagerduty team:blue#3']],
      [3, 600, 'beyond_deadline', ['webhook team:blue#4']],
    ],
  )
  assert.deepEqual(plan.next, { step: 0, at: '2026-12-06T10:00:00.000Z' })
})

test('every bad entry is refused, naming the entry and never a key', async () => {
  const refusals: [unknown, RegExp][] = [
    [{ person: '' }, /\[0\]: person: must be a person's id/],
    [{ person: 'a b' }, /\[0\]: person: must not hold spaces or slashes/],
    [{ person: 42 }, /\[0\]: person: must be a person's id/],
    [{ person: 'olivia', after_s: 'soon' }, /\[0\]: after_s: must be a whole number of seconds/],
    [{ url: 'https://hooks.example/a', after_s: -1 }, /\[0\]: after_s: must be 0 or more/],
    [{ url: 'https://hooks.example/a', after_s: 1.5 }, /\[0\]: after_s: must be a whole number of seconds/],
    [{ url: 'https://hooks.example/a', after_s: 90_000 }, /\[0\]: after_s: must be at most 86400/],
    [{ pagerduty: {} }, /\[0\]: pagerduty: set routingKey or routingKeyFile/],
    [{ pagerduty: { routingKey: KEY, routingKeyFile: 'pd-key' } }, /set routingKey or routingKeyFile/],
    [{ pagerduty: { routingKey: 'short' } }, /\[0\]: pagerduty\.routingKey: must be at least 8 characters/],
    [{ pagerduty: { routingKeyFile: 'missing' } }, /\[0\]: routingKeyFile: cannot read .*missing \(ENOENT\)/],
    [{ pagerduty: { routingKeyFile: 'spaced-key' } }, /\[0\]: routingKeyFile: spaced-key must be printable/],
    [{ pagerduty: { routingKey: KEY, url: 'ftp://pager.example/' } }, /\[0\]: pagerduty\.url: must be/],
    [{ pagerduty: { routingKey: KEY, token: 'x' } }, /\[0\]: pagerduty: .*token/i],
  ]
  for (const [entry, want] of refusals) {
    const file = await notifyFile([entry])
    await assert.rejects(loadNotifyFile(file, env), (err: Error) => {
      assert.match(err.message, want, JSON.stringify(entry))
      assert.ok(!err.message.includes(KEY) && !err.message.includes('has a space'), 'no key in the message')
      return true
    })
  }
  const twice = await notifyFile([{ person: 'olivia' }, { person: 'olivia', after_s: 5 }])
  await assert.rejects(loadNotifyFile(twice, env), /\[1\]: the same person as an earlier entry/)
})

test('two pagers on one URL are told apart by their key; the same key twice stops the boot; the claim TTL is bounded', async () => {
  const url = 'https://127.0.0.1:9/v2/enqueue'
  const two = await notifyFile([
    { pagerduty: { routingKey: KEY, url } },
    { pagerduty: { routingKey: `${KEY}-other`, url }, after_s: 60 },
  ])
  const app = await buildApp(loadConfig(testEnv({ GATEWAY_NOTIFY_FILE: two })))
  assert.deepEqual(
    app.notifications
      ?.routes()
      .teams.get('blue')
      ?.map((t) => t.label),
    ['team:blue#0', 'team:blue#1'],
  )
  await app.close()
  // Named by their place in the file, a person entry before them included.
  const same = await notifyFile([
    { person: 'olivia' },
    { pagerduty: { routingKey: KEY, url } },
    { pagerduty: { routingKey: KEY, url } },
  ])
  await assert.rejects(buildApp(loadConfig(testEnv({ GATEWAY_NOTIFY_FILE: same }))), (err: Error) => {
    assert.match(err.message, /teams\."blue"\[2\]\.url: the same URL as \[1\]/)
    assert.ok(!err.message.includes(KEY))
    return true
  })
  for (const ttl of ['0', '86401', '1.5'])
    assert.throws(() => loadConfig(testEnv({ GATEWAY_CLAIM_TTL_S: ttl })), /GATEWAY_CLAIM_TTL_S/)
})
