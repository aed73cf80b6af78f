import assert from 'node:assert/strict'
import { test } from 'node:test'
import { call, frames, MESSAGING, openStream, startRuntime, waitFor } from './helpers.ts'

type Json = Record<string, unknown>

test('autoplay plays a believable run: phases, steps with screenshots, a question, messages, stop, a new run', async (t) => {
  const rt = await startRuntime(t, { autoplay: { intervalMs: 25 } })
  const firstRun = rt.run
  const stream = await openStream(t, rt.url, 'events')
  const of = (type: string) => frames(stream).filter((f) => f.event === type)

  await waitFor('a goal in an info snapshot', () =>
    of('info').some((f) => typeof (f.data.info as Json).goal === 'string'),
  )
  await waitFor('the agentic phase', () =>
    of('status').some((f) => (f.data.status as Json).phase === 'agentic'),
  )
  assert.deepEqual(
    of('status').map((f) => (f.data.status as Json).phase),
    ['boot', 'launch', 'agentic'],
  )
  await waitFor('steps with screenshots', () => of('screenshot').length >= 3 && of('iteration').length >= 3)
  const shot = of('screenshot')[0]?.data.screenshot as Json
  const png = await fetch(`${rt.url}artifacts/${shot.file as string}`)
  assert.equal(png.status, 200)
  assert.equal(png.headers.get('content-type'), 'image/png')
  const step = of('step')[0]?.data.step as Json
  for (const key of ['n', 'action', 'backend', 'rung', 'expect', 'result', 'duration_ms', 'post', 'url']) {
    assert.ok(key in step, `step.${key}`)
  }

  // A message reaches the loop and the next model call acknowledges it.
  const sent = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: { run: rt.run, key: 'hint', text: 'Use the 2026 template' },
  })
  await waitFor(
    'responded',
    async () => (await call(rt.url, 'GET', `messages/${sent.body.id}`)).body.state === 'responded',
  )

  // The agent asks a typed question and waits; a valid reply closes it and the run goes on.
  const request = await waitFor('an open question', async () => {
    const open = (await call(rt.url, 'GET', 'requests?state=open')).body.requests as Json[]
    return open[0]
  })
  const fields = request.fields as Json[]
  assert.equal(fields[0]?.type, 'string')
  assert.ok(Array.isArray(fields[0]?.enum))
  await waitFor('the acknowledgement', () =>
    of('iteration').some((f) => String((f.data.iteration as Json).content).includes('Use the 2026 template')),
  )
  const stepsWhileWaiting = of('step').length
  const reply = await call(rt.url, 'POST', 'messages', {
    token: MESSAGING,
    body: {
      run: rt.run,
      key: 'answer',
      reply_to: request.request_id,
      revision: request.revision,
      values: { [fields[0]?.id as string]: (fields[0]?.enum as string[] | undefined)?.[1] },
    },
  })
  assert.equal(reply.status, 202)
  await waitFor('the answer logged', () =>
    of('log').some((f) => String((f.data.log as Json).msg).startsWith('answer to')),
  )
  await waitFor('work resumes', () => of('step').length > stepsWhileWaiting + 2)

  // Stop ends the run (done, verdict from the stop); a new run follows.
  const stop = await call(rt.url, 'POST', 'actions', {
    token: MESSAGING,
    body: { run: rt.run, key: 'stop', action: 'stop' },
  })
  assert.equal(stop.status, 202)
  await waitFor('done', () => of('done').length === 1)
  const final = of('status').at(-1)?.data.status as Json
  assert.equal(final.phase, 'done')
  assert.equal(final.outcome, 'stopped')
  await waitFor('a new run', () => rt.run !== firstRun)
  await waitFor('the new run on the same stream', () => stream.comments.includes(`run ${rt.run}`))
  const inRun = (type: string) => of(type).filter((f) => String(f.id).startsWith(`${rt.run}:`))
  await waitFor('the new run plays', () => inRun('status').length >= 2 && inRun('info').length >= 1)
  const info = inRun('info')[0]?.data.info as Json | undefined
  assert.equal(info?.run_id, rt.run)
  assert.equal(typeof info?.goal, 'string', 'a new run opens with a complete snapshot')
  assert.equal(inRun('info').length, 1)
  assert.equal((inRun('status')[0]?.data.status as Json | undefined)?.phase, 'boot')
})

test('autoplay of another play: its own app, goal, steps and questions (the demo’s second session)', async (t) => {
  const rt = await startRuntime(t, { autoplay: { intervalMs: 25, play: 'crm' } })
  const stream = await openStream(t, rt.url, 'events')
  const of = (type: string) => frames(stream).filter((f) => f.event === type)
  await waitFor('the info snapshot with a goal', () =>
    of('info').some((f) => typeof (f.data.info as Json).goal === 'string'),
  )
  const info = of('info').find((f) => typeof (f.data.info as Json).goal === 'string')?.data.info as Json
  assert.deepEqual([info.app, info.goal], ['crm', 'Merge the duplicate ACME contacts in the CRM'])
  await waitFor('the first step', () => of('step').length >= 1)
  assert.equal((of('step')[0]?.data.step as Json | undefined)?.url, 'https://crm.example.test/contacts')
  const request = await waitFor('an open question', async () => {
    const open = (await call(rt.url, 'GET', 'requests?state=open')).body.requests as Json[]
    return open[0]
  })
  assert.match(String(request.title), /account owners/)
})
