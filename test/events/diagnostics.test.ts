import assert from 'node:assert/strict'
import diagnostics from 'node:diagnostics_channel'
import { test } from 'node:test'
import {
  type HubMessage,
  hubChannel,
  type ReadMessage,
  readChannel,
  storedChannel,
} from '../../src/events/diagnostics.ts'
import { eventsAtLeast, openSse, startStack } from './helpers.ts'

test('the event path publishes each batch where it passes: read from the runtime, stored, at the hub', async (t) => {
  const { rt, token, eventsUrl } = await startStack(t)
  const seen: { stage: string; kasmId: string; data: string[] }[] = []
  const onRead = (m: unknown) => {
    const { kasmId, messages } = m as ReadMessage
    seen.push({ stage: 'read', kasmId, data: messages.flatMap((x) => (x.kind === 'event' ? [x.data] : [])) })
  }
  const onStored = (m: unknown) => {
    const { kasmId, messages } = m as ReadMessage
    seen.push({
      stage: 'stored',
      kasmId,
      data: messages.flatMap((x) => (x.kind === 'event' ? [x.data] : [])),
    })
  }
  const onHub = (m: unknown) => {
    const { kasmId, deliveries } = m as HubMessage
    const data = deliveries.flatMap((d) => (d.message.kind === 'event' ? [d.message.data] : []))
    seen.push({ stage: 'hub', kasmId, data })
  }
  diagnostics.subscribe('krg:events:read', onRead)
  diagnostics.subscribe('krg:events:stored', onStored)
  diagnostics.subscribe('krg:events:hub', onHub)
  t.after(() => {
    diagnostics.unsubscribe('krg:events:read', onRead)
    diagnostics.unsubscribe('krg:events:stored', onStored)
    diagnostics.unsubscribe('krg:events:hub', onHub)
  })
  // The names are the probes' contract (bench/probes/stages.mjs subscribes by name).
  assert.deepEqual(
    [readChannel.name, storedChannel.name, hubChannel.name],
    ['krg:events:read', 'krg:events:stored', 'krg:events:hub'],
  )

  const viewer = await openSse(eventsUrl, { authorization: `Bearer ${token}` })
  t.after(() => viewer.close())
  await eventsAtLeast(viewer, 1)
  const { line } = rt.emit('log', { level: 'info', msg: 'marked', t: 1234.5 })
  await eventsAtLeast(viewer, 2)

  const stages = seen.filter((s) => s.kasmId === 's1' && s.data.includes(line)).map((s) => s.stage)
  // Read first; with the memory bus the append hands the batch to the hub before it answers.
  assert.deepEqual(stages, ['read', 'hub', 'stored'])
})
