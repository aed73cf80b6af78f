import assert from 'node:assert/strict'
import { Readable } from 'node:stream'
import { test } from 'node:test'
import pino from 'pino'
import { OwnFault } from '../../src/events/own-fault.ts'
import { type ParsedChunk, readChunks } from '../../src/events/upstream-events.ts'
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

function chunks(...texts: string[]): Readable {
  return Readable.from(texts.map((t) => Buffer.from(t)))
}

async function all(body: Readable, run?: string): Promise<ParsedChunk[]> {
  const out: ParsedChunk[] = []
  await readChunks(body, options(run), async (chunk) => {
    out.push(chunk)
    return true
  })
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
    readChunks(Readable.from(body()), options(undefined), async (chunk) => {
      seen.push(chunk)
      return true
    }),
    (err) => err === broken,
  )
  assert.equal(seen.length, 1)
})

test('one chunk is handled at a time, the body paused meanwhile; its end waits for the chunk in hand', async () => {
  const body = new Readable({ read() {} })
  let inHand = 0
  let most = 0
  const handled: number[] = []
  let release: () => void = () => {}
  const done = readChunks(body, options(undefined), async (chunk) => {
    inHand++
    most = Math.max(most, inHand)
    const seq = chunk.messages[0]?.kind === 'event' ? chunk.messages[0].seq : -1
    if (seq === 1) await new Promise<void>((r) => (release = r))
    handled.push(seq)
    inHand--
    return true
  })
  let finished = false
  void done.then(() => (finished = true))
  body.push(Buffer.from(event('r1', 1)))
  body.push(Buffer.from(event('r1', 2)))
  body.push(null)
  await new Promise((r) => setImmediate(r))
  await new Promise((r) => setImmediate(r))
  assert.deepEqual(handled, [], 'the first chunk is still in hand')
  assert.equal(body.isPaused(), true)
  assert.equal(finished, false, 'the end waits for it')
  release()
  await done
  assert.deepEqual(handled, [1, 2])
  assert.equal(most, 1)
})

test('a body that fails while a chunk is in hand fails once that chunk is handled, with its own error', async () => {
  const body = new Readable({ read() {} })
  const broken = new Error('socket hang up')
  let release: () => void = () => {}
  let handled = false
  let failed: unknown = null
  const reading = readChunks(body, options(undefined), async () => {
    await new Promise<void>((r) => (release = r))
    handled = true
    return true
  }).catch((err: unknown) => {
    failed = err
  })
  body.push(Buffer.from(event('r1', 1)))
  await new Promise((r) => setImmediate(r))
  body.destroy(broken)
  await new Promise((r) => setImmediate(r))
  await new Promise((r) => setImmediate(r))
  assert.equal(failed, null, 'the failure waits for the chunk in hand')
  release()
  await reading
  assert.equal(handled, true)
  assert.equal(failed, broken)
})

test('false from the handler stops the reading; a body cut short fails as the runtime’s', async () => {
  const seen: number[] = []
  await readChunks(chunks(event('r1', 1), event('r1', 2), event('r1', 3)), options(undefined), async (c) => {
    seen.push(c.messages.length)
    return false
  })
  assert.deepEqual(seen, [1])
  const cut = new Readable({ read() {} })
  const reading = readChunks(cut, options(undefined), async () => true)
  cut.push(Buffer.from(event('r1', 1)))
  setImmediate(() => cut.destroy())
  await assert.rejects(reading, { code: 'ERR_STREAM_PREMATURE_CLOSE' })
})

test('what the handler rejects with passes as it is, and a fault of the parsing is the gateway’s', async () => {
  const mine = new Error('the bus is down')
  await assert.rejects(
    readChunks(chunks(event('r1', 1)), options(undefined), async () => {
      throw mine
    }),
    (err) => err === mine,
  )
  const base = options(undefined)
  const fault = readChunks(
    chunks(event('r1', 1)),
    {
      ...base,
      echo: {
        maskText: () => {
          throw new Error('a bug of ours')
        },
      } as unknown as typeof base.echo,
    },
    async () => true,
  )
  await assert.rejects(fault, (err) => err instanceof OwnFault)
})
