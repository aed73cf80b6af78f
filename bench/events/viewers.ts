/**
 * Bench child: N SSE viewers on raw TCP sockets (the cheapest client, so the machine's two cores go to the
 * servers under test). Each chunk read is scanned for the events' `"t":<ms>` field: every occurrence is one
 * delivery, and now - t is its delay from the runtime's write, recorded in a 10 us histogram.
 */
import net from 'node:net'
import { serve } from './ipc.ts'

const MARK = Buffer.from('"t":')
const BUCKET_MS = 0.01
const BUCKETS = 500_000 // 5 s; anything later goes to the last bucket

/** What is recorded while the orchestrator runs one kind of phase (deliveries outside any are dropped). */
class Recording {
  readonly histogram = new Uint32Array(BUCKETS + 1)
  deliveries = 0
  max = 0
}
const records = new Map<string, Recording>()
let current: Recording | null = null
const sockets = new Set<net.Socket>()
let ended = 0

function onData(chunk: Buffer): void {
  const now = performance.timeOrigin + performance.now()
  let at = chunk.indexOf(MARK)
  while (at !== -1) {
    let end = at + MARK.length
    while (end < chunk.length) {
      const c = chunk[end] as number
      if ((c < 48 || c > 57) && c !== 46) break
      end++
    }
    const record = current
    if (record !== null) {
      record.deliveries++
      // A number cut by the chunk's end is counted but not timed.
      if (end < chunk.length) {
        const delay = now - Number(chunk.toString('latin1', at + MARK.length, end))
        if (delay > record.max) record.max = delay
        const bucket = Math.min(BUCKETS, Math.max(0, Math.floor(delay / BUCKET_MS)))
        record.histogram[bucket] = (record.histogram[bucket] ?? 0) + 1
      }
    }
    at = chunk.indexOf(MARK, end)
  }
}

function percentile(histogram: Uint32Array, p: number): number {
  let total = 0
  for (const n of histogram) total += n
  if (total === 0) return Number.NaN
  const want = Math.ceil(total * p)
  let seen = 0
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i] as number
    if (seen >= want) return (i + 0.5) * BUCKET_MS
  }
  return Number.NaN
}

/** Opens one viewer; resolves true once a 200 response head arrived. */
function open(port: number, request: Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1', noDelay: true })
    let head = true
    let settled = false
    const settle = (ok: boolean) => {
      if (settled) return
      settled = true
      resolve(ok)
    }
    socket.on('connect', () => socket.write(request))
    socket.on('data', (chunk: Buffer) => {
      if (head) {
        head = false
        settle(chunk.toString('latin1', 0, 12).includes(' 200'))
      }
      onData(chunk)
    })
    socket.on('error', () => settle(false))
    socket.on('close', () => {
      settle(false)
      if (sockets.delete(socket)) ended++
    })
    sockets.add(socket)
  })
}

serve({
  connect: async (args) => {
    const { port, path, headers, count, batch } = args as {
      port: number
      path: string
      headers: Record<string, string>
      count: number
      batch: number
    }
    const lines = [`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Accept: text/event-stream']
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
    const request = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`)
    let ok = 0
    for (let done = 0; done < count; done += batch) {
      const results = await Promise.all(
        Array.from({ length: Math.min(batch, count - done) }, () => open(port, request)),
      )
      ok += results.filter(Boolean).length
    }
    return { connected: ok, failed: count - ok }
  },
  /** Records into `name` from now on (null: record nothing). */
  record: (args) => {
    const { name } = args as { name: string | null }
    if (name === null) {
      current = null
      return null
    }
    let record = records.get(name)
    if (record === undefined) {
      record = new Recording()
      records.set(name, record)
    }
    current = record
    return null
  },
  stats: (args) => {
    const { name } = args as { name: string }
    const record = records.get(name)
    return {
      deliveries: record?.deliveries ?? 0,
      p50: record ? percentile(record.histogram, 0.5) : Number.NaN,
      p99: record ? percentile(record.histogram, 0.99) : Number.NaN,
      max: record?.max ?? Number.NaN,
      open: sockets.size,
      ended,
    }
  },
  close: () => {
    for (const s of sockets) s.destroy()
    sockets.clear()
    return null
  },
})
