import assert from 'node:assert/strict'
import { test } from 'node:test'
import { PLATFORM_FAILURES_MAX } from '../../src/auth/address-failures.ts'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import {
  channelConversationId,
  installActivity,
  mentionActivity,
  startBotFramework,
  teamsUser,
} from '../fixtures/bot-framework.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * Two replicas sharing a real Redis, one Teams bot: an installation delivered to one is listed by the other,
 * an activity Teams delivers twice (once to each) is answered once, and each refuses what is not signed.
 */

test('two replicas: installations and refusals per address shared, one reply for an activity delivered to both', async (t) => {
  const bf = await startBotFramework()
  t.after(() => bf.close())
  const env = { ...bf.env(), ...sharedRedisEnv(t) }
  const a = await startGateway(env)
  t.after(() => a.close())
  const b = await startGateway(env)
  t.after(() => b.close())
  const endpointOf = (gw: typeof a) => `${gw.url}${gw.app.config.basePath}teams/messages`

  const conversationId = channelConversationId('cluster')
  const place = { serviceUrl: bf.serviceUrl, conversationId, teamName: 'Support' }
  assert.equal((await bf.send(endpointOf(a), installActivity(place, teamsUser()))).status, 200)
  const token = await bearer({ sub: 'ada', roles: ['admin'], teams: ['*'] })
  const res = await fetch(`${b.url}${b.app.config.basePath}admin/msteams/conversations`, {
    headers: { authorization: `Bearer ${token}` },
  })
  assert.equal(res.status, 200)
  const { conversations } = (await res.json()) as {
    conversations: { conversationId: string; teamName?: string }[]
  }
  assert.deepEqual(
    conversations.map((c) => [c.conversationId, c.teamName]),
    [[conversationId, 'Support']],
  )

  // Refusals are counted by the cluster: half the limit on each replica, each 401; B, past the shared count,
  // answers 429, and A learns the count at its next refusal (401 as it is counted) and limits from then on.
  const unsigned = (gw: typeof a) =>
    bf.send(endpointOf(gw), installActivity(place, teamsUser()), { authorization: null })
  const half = PLATFORM_FAILURES_MAX / 2
  const statuses: number[] = []
  for (let n = 0; n < PLATFORM_FAILURES_MAX; n++) statuses.push((await unsigned(n < half ? a : b)).status)
  assert.deepEqual(new Set(statuses), new Set([401]))
  const limited = await unsigned(b)
  assert.equal(limited.status, 429, 'B saw only half the limit itself')
  assert.equal((limited.json as { error: string }).error, 'msteams_unauthorized_rate_limited')
  assert.equal((await unsigned(a)).status, 401)
  assert.equal((await unsigned(a)).status, 429)

  // Teams retries an activity it saw no answer to; another replica may get it: one reply in all.
  // (From the limited address: an activity the Bot Framework signed is served by both.)
  const thread = `${conversationId};messageid=42`
  const mention = mentionActivity({ serviceUrl: bf.serviceUrl, conversationId: thread }, teamsUser())
  assert.equal((await bf.send(endpointOf(a), mention)).status, 200)
  assert.equal((await bf.send(endpointOf(b), mention)).status, 200)
  const marker = mentionActivity({ serviceUrl: bf.serviceUrl, conversationId: thread }, teamsUser(), 'marker')
  assert.equal((await bf.send(endpointOf(b), marker)).status, 200)
  await waitFor('both mentions answered', () => bf.posted(thread).length >= 2)
  // Each replica finished its work before the check: closing waits for replies still being posted.
  await a.close()
  await b.close()
  assert.equal(bf.posted(thread).length, 2, 'the repeated activity was answered once')

  // Each replica refuses an unsigned activity on its own (checked above on one gateway in detail); a new one
  // learns the shared count at its first refusal.
  const c = await startGateway(env)
  t.after(() => c.close())
  assert.equal((await unsigned(c)).status, 401)
  assert.equal((await unsigned(c)).status, 429)
})
