import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startDemoColleague } from '../../src/dev/demo-colleague.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { addRuntime, call, type Entry, fastEnv, openOverview } from '../overview/helpers.ts'
import { captureLogs } from '../sessions/capture-logs.ts'

const SAM = 'Sam (demo colleague)'

test('Sam says "I\'m on it" before he answers, and leaves a question someone holds until they give it back', async (t) => {
  const logs = captureLogs('debug')
  const gw = await startGateway({ ...fastEnv, LOG_LEVEL: 'debug' }, { logger: logs.logger })
  t.after(() => gw.close())
  const rt = await addRuntime(t, gw, 'k1', 'blue')
  const carol = await bearer({ sub: 'carol', name: 'Carol', roles: ['operator'], teams: ['blue'] })
  const overview = await openOverview(t, gw, carol)
  // Sam looks `looksAfterMs` after a question opens, then every 300 ms while someone else holds it.
  const sam = (looksAfterMs: number) => {
    const stop = startDemoColleague(gw.app, ['k1'], {
      answerAfterMs: [looksAfterMs, looksAfterMs],
      typingMs: 300,
      recheckMs: 300,
      finishAfterMs: 300,
    })
    t.after(stop)
    return stop
  }
  const quickSam = sam(300)
  // The colleague hears of questions from the session's summary: it is watched once the reader is live.
  await overview.until('the runtime read live', (m) => m.get('k1')?.health === 'live')
  const fields = [{ id: 'ok', type: 'boolean', required: true }]
  const answeredBy = async (requestId: string) => {
    const res = await call(
      `${gw.url}/api/sessions/k1/requests/${requestId}/answer?run=${encodeURIComponent(rt.run)}`,
      'GET',
      carol,
    )
    return res.status === 200 ? String(res.body?.name) : null
  }
  // Any frame, not only the latest: his mark may last only until his answer closes the question.
  const markedBySam = (requestId: string) =>
    overview.sse.events.some((e) => {
      if (e.event !== 'session') return false
      const entry = JSON.parse(e.data) as Entry
      return entry.kasmId === 'k1' && entry.claims[requestId]?.name === SAM
    })
  const open = (requestId: string) =>
    overview
      .entries()
      .get('k1')
      ?.summary?.openRequests.some((r) => r.requestId === requestId) === true

  // Nobody holds the first: his mark shows, then his answer closes it.
  const first = rt.ask({ title: 'Go on?', fields }).request_id
  await waitFor('his mark', () => markedBySam(first))
  assert.equal(await waitFor('his answer', () => answeredBy(first)), SAM)

  // Carol holds the second: he looks, leaves it, and looks again while she has it. She says she is on it
  // before he first looks: a Sam who waits 15 s for that, which a loaded machine's delays (the question
  // reaching her overview, her claim's answer) stay far from; her claim's status is checked, so a slower one
  // fails as itself.
  quickSam()
  sam(15_000)
  const second = rt.ask({ title: 'Go on again?', fields }).request_id
  await overview.until('the second question', () => open(second))
  const claim = `${gw.url}/api/sessions/k1/requests/${second}/claim?run=${encodeURIComponent(rt.run)}`
  assert.equal((await call(claim, 'PUT', carol)).status, 200, 'Carol said she is on it first')
  const steppedAside = () =>
    logs
      .records()
      .filter(
        (r) => r.requestId === second && String(r.msg).startsWith('demo colleague: someone else is on it'),
      ).length
  await waitFor('Sam to look twice, or to answer', () => steppedAside() >= 2 || !open(second), 60_000)
  assert.ok(open(second), `Sam answered a question Carol holds (answered by ${await answeredBy(second)})`)
  assert.equal(overview.entries().get('k1')?.claims[second]?.name, 'Carol')
  assert.equal(await answeredBy(second), null)

  // She gives it back: he takes it and answers.
  assert.equal((await call(claim, 'DELETE', carol)).status, 204)
  await waitFor('his mark on it', () => markedBySam(second))
  assert.equal(await waitFor('his answer to it', () => answeredBy(second)), SAM)
})
