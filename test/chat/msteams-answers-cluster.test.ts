import assert from 'node:assert/strict'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { startSimulatedRuntime } from '../../src/dev/runtime/index.ts'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { freePort } from '../cluster/redis-harness.ts'
import { fastEventEnv } from '../events/helpers.ts'
import { channelConversationId, startBotFramework, TENANT_ID, teamsUser } from '../fixtures/bot-framework.ts'
import { waitFor } from '../helpers/wait.ts'
import { Browser, startReplicaOf, startSignInStack } from '../signin/harness.ts'
import { PEOPLE } from './helpers.ts'
import { cardAbout, cardOf, cardText, clickCard } from './msteams-helpers.ts'

/**
 * Two replicas on a real Redis, one Teams bot: the replica reading the session posts the card once; a person
 * known by an Entra sign-in on one replica answers through the other (the link, the card's record and the audit
 * record are shared), and the card is updated once for everyone.
 */

test('two replicas: one card per question, and an invoke on the other replica answers it', async (t) => {
  const bf = await startBotFramework()
  t.after(() => bf.close())
  const conversation = channelConversationId('cluster-answers')
  const dir = await mkdtemp(join(tmpdir(), 'krg-teams-'))
  const file = join(dir, 'notify.json')
  await writeFile(
    file,
    JSON.stringify({ teams: { blue: [{ msteams: { conversation, serviceUrl: bf.serviceUrl } }] } }),
  )
  const olivia = teamsUser('Olivia Operator')
  const idpPort = await freePort()
  const env = {
    ...fastEventEnv,
    ...bf.env(),
    ...sharedRedisEnv(t),
    GATEWAY_LEASE_MS: '2000',
    GATEWAY_NOTIFY_FILE: file,
    GATEWAY_TEAMS_ENTRA_ISSUER: `http://127.0.0.1:${idpPort}`,
  }
  const people = PEOPLE.map((p) =>
    p.sub === 'olivia' ? { ...p, extraClaims: { tid: TENANT_ID, oid: olivia.aadObjectId } } : p,
  )
  const a = await startSignInStack(t, { env, idp: { people, port: idpPort } })
  const b = await startReplicaOf(t, a, env)
  const token = 'messaging-token-for-teams-cluster'
  const rt = await startSimulatedRuntime({ messagingToken: token })
  t.after(() => rt.close())
  await a.app.sessions.put({
    kasmId: 'k1',
    upstream: rt.url,
    team: 'blue',
    messagingToken: token,
    source: 'admin',
  })
  await waitFor('both replicas know k1', async () => (await b.app.sessions.get('k1')) !== undefined)
  await waitFor('one replica reads k1', () => rt.openEventStreams === 1)

  // Olivia signs in on replica a.
  const browser = new Browser()
  let page = await browser.navigate(`${a.base}auth/login`)
  if (page.text.includes('/login"'))
    page = await browser.submit(page, '/login', { username: 'olivia', password: a.idp.password })
  if (page.text.includes('/consent"')) page = await browser.submit(page, '/consent')
  assert.ok(browser.cookies.has('krg_session'))

  const q = rt.ask({ title: 'Clustered?', fields: [{ id: 'ok', type: 'boolean', required: true }] })
  const posted = await cardAbout(bf, conversation, 'Clustered?')
  const endpointB = `${b.origin}${b.app.config.basePath}teams/messages`
  const mine = await clickCard(bf, endpointB, conversation, olivia, posted, 'Yes')
  // The clicker's own card: the answered card, or, when the runtime's answer takes longer than a click may wait
  // (9 s, reachable on a loaded machine), "on its way"; the shared card below is what shows the answer either way.
  assert.match(
    cardText(mine),
    /Answered by Olivia Operator in Teams · ok: Yes|Your answer is on its way to the run/,
  )
  await waitFor('the shared card updated', () => posted.updates === 1)
  assert.match(cardText(cardOf(posted)), /Answered by Olivia Operator in Teams/)
  assert.equal(
    bf.posted(conversation).filter((x) => cardText(cardOf(x)).includes('Clustered?')).length,
    1,
    'one card',
  )
  const replies = rt.received.filter((r) => r.method === 'POST' && r.url.split('?')[0] === '/messages')
  assert.equal(replies.length, 1)
  assert.equal(q.revision, 1)
})
