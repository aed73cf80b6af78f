import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import { type ParsedChunk, parsedChunks } from '../../src/events/upstream-events.ts'
import { Secret } from '../../src/sessions/secret.ts'
import { tokenEcho } from '../../src/upstream/token-echo.ts'
import { eventMetrics } from './helpers.ts'

function options(run: string | undefined) {
  const { metrics } = eventMetrics()
  return {
    kasmId: 'k',
    run,
    maxEventBytes: 64,
    echo: tokenEcho(new Secret('secret-token')),
    log: pino({ level: 'silent' }),
    metrics,
    onBytes: () => {},
  }
}

async function* chunks(...texts: string[]): AsyncGenerator<Buffer> {
  for (const text of texts) yield Buffer.from(text)
}

async function all(body: AsyncIterable<Buffer>, run?: string): Promise<ParsedChunk[]> {
  const out: ParsedChunk[] = []
  for await (const chunk of parsedChunks(body, options(run))) out.push(chunk)
  return out
}

const event = (run: string, seq: number, data = '{}') => `id: ${run}:${seq}\nevent: log\ndata: ${data}\n\n`

test('one item per chunk that held events; a chunk of comments only yields nothing', async () => {
  const got = await all(chunks(': run r1\n\n', event('r1', 1) + event('r1', 2), ': ping\n\n', event('r1', 3)))
  assert.deepEqual(
    got.map((c) => c.messages.map((m) => (m.kind === 'event' ? m.seq : m.kind))),
    [[1, 2], [3]],
  )
})

test('a closed without an announced run belongs to the run of the last chunk; nothing after it is read', async () => {
  const got = await all(chunks(event('r2', 1), 'event: closed\ndata: {}\n\n', event('r2', 9)), 'r1')
  assert.equal(got.length, 2)
  assert.deepEqual(got[1], { messages: [{ kind: 'closed', run: 'r2' }], skippedTo: undefined, closed: true })
})

test('an event over the cap is skipped and said so; an echoed token is masked', async () => {
  const big = JSON.stringify({ text: 'x'.repeat(100) })
  const got = await all(chunks(event('r1', 1), event('r1', 2, big) + event('r1', 3, '"secret-token"')))
  assert.equal(got[1]?.skippedTo, 2)
  const third = got[1]?.messages[0]
  assert.ok(third?.kind === 'event' && third.seq === 3 && !third.data.includes('secret-token'))
})

test("what reading the body throws passes as it is (the runtime's), not as a fault of the gateway", async () => {
  const broken = new Error('socket hang up')
  async function* body(): AsyncGenerator<Buffer> {
    yield Buffer.from(event('r1', 1))
    throw broken
  }
  const seen: ParsedChunk[] = []
  await assert.rejects(
    (async () => {
      for await (const chunk of parsedChunks(body(), options(undefined))) seen.push(chunk)
    })(),
    (err) => err === broken,
  )
  assert.equal(seen.length, 1)
})
