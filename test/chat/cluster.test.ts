import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { SIGNATURE_FAILURES_MAX } from '../../src/routes/slack.ts'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import {
  interactionBody,
  postInteraction,
  SIGNING_SECRET,
  slackSignature,
  startSlackStandIn,
} from '../fixtures/slack-api.ts'
import { waitFor } from '../helpers/wait.ts'
import { startReplicaOf, startSignInStack } from '../signin/harness.ts'
import {
  buttons,
  CHANNEL,
  confirmWithCode,
  ephemeralAfter,
  linkIn,
  notifyFile,
  OLIVIA,
  openLink,
  PEOPLE,
  slackEnv,
  TOKEN,
  textOf,
} from './helpers.ts'

/**
 * Two replicas on a real Redis, one Slack app: the replica reading the session posts (once), an interaction
 * reaching the other replica is answered there (its link, its message and the audit record are shared), and
 * a signed request replayed to the other replica is refused; failed signatures are counted for both.
 */

test('two replicas: one message per question, and a click on the other replica answers it', async (t) => {
  const slack = await startSlackStandIn()
  t.after(() => slack.close())
  const env = { ...slackEnv(slack, await notifyFile()), ...sharedRedisEnv(t), GATEWAY_LEASE_MS: '2000' }
  const a = await startSignInStack(t, { env, idp: { people: PEOPLE } })
  const b = await startReplicaOf(t, a, env)
  const rt = await startSimulatedRuntime({ messagingToken: TOKEN })
  t.after(() => rt.close())
  await a.app.sessions.put({
    kasmId: 'k1',
    upstream: rt.url,
    team: 'blue',
    messagingToken: TOKEN,
    source: 'admin',
  })
  await waitFor('both replicas know k1', async () => (await b.app.sessions.get('k1')) !== undefined)
  await waitFor('one replica reads k1', () => rt.openEventStreams === 1)

  rt.ask({ title: 'First question', fields: [{ id: 'ok', type: 'boolean' }] })
  const first = await waitFor('posted', () => slack.posts(CHANNEL)[0])
  rt.ask({ title: 'Second question', fields: [{ id: 'ok', type: 'boolean' }] })
  await waitFor('the second', () => slack.posts(CHANNEL).length === 2)
  assert.deepEqual(
    slack.posts(CHANNEL).map((m) => /\*(First|Second) question\*/.exec(textOf(m))?.[1]),
    ['First', 'Second'],
    'each question once, in order, though both replicas fold the session',
  )

  // The whole flow through replica B: the click, the link (the public origin is A's), the answer.
  const toB = `${b.origin}${a.app.config.basePath}slack/interactions`
  assert.equal((await postInteraction(toB, slack.click(OLIVIA, first, 'krg:choose:0'))).status, 200)
  const { browser, page } = await openLink(linkIn(await ephemeralAfter(slack, OLIVIA, 0)), 'olivia')
  assert.equal((await confirmWithCode(slack, OLIVIA, browser, page)).done.status, 200)
  const payload = slack.click(OLIVIA, first, 'krg:choose:0')
  const now = Math.floor(Date.now() / 1000)
  const body = interactionBody(payload)
  const signed = { timestamp: now, signature: slackSignature(SIGNING_SECRET, now, body), body }
  assert.equal((await postInteraction(toB, payload, signed)).status, 200)
  await waitFor('the message updated', () => first.updates === 1)
  assert.match(textOf(first), /Answered by Olivia Operator in Slack · ok: Yes/)
  assert.deepEqual(Object.keys(buttons(first)), ['krg:console'])
  // The same signed request replayed to the other replica: refused there too.
  const replay = await postInteraction(`${a.base}slack/interactions`, payload, signed)
  assert.equal(replay.status, 409)
  assert.equal((replay.json as { error: string }).error, 'slack_request_replayed')
  assert.equal(slack.of('chat.update').length, 1)
})

test('two replicas count failed Slack signatures together: the limit is the cluster’s, and valid requests pass both', async (t) => {
  const slack = await startSlackStandIn()
  t.after(() => slack.close())
  const env = { ...slackEnv(slack, await notifyFile()), ...sharedRedisEnv(t) }
  const a = await startSignInStack(t, { env, idp: { people: PEOPLE } })
  const b = await startReplicaOf(t, a, env)
  const urls = [`${a.base}slack/interactions`, `${b.origin}${a.app.config.basePath}slack/interactions`]
  const forge = (url: string) => postInteraction(url, { type: 'view_closed' }, { secret: 'not-the-secret' })
  // Half the limit on each replica: each is 401, and the last on B reaches the shared count.
  const half = SIGNATURE_FAILURES_MAX / 2
  const statuses: number[] = []
  for (let n = 0; n < SIGNATURE_FAILURES_MAX; n++)
    statuses.push((await forge(urls[n < half ? 0 : 1] ?? '')).status)
  assert.deepEqual(new Set(statuses), new Set([401]))
  assert.equal((await forge(urls[1] ?? '')).status, 429, 'B saw only half the limit itself')
  // A learns the count at its next failure (refused 401 as it is counted), and limits from then on.
  assert.equal((await forge(urls[0] ?? '')).status, 401)
  assert.equal((await forge(urls[0] ?? '')).status, 429)
  for (const url of urls) assert.equal((await postInteraction(url, { type: 'view_closed', url })).status, 200)
})
