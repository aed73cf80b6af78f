/**
 * Bench child: N SSE viewers on raw TCP sockets (the cheapest client, so the two cores go to the servers).
 * Each chunk is scanned for the events' `"t":<ms>` field (the emitter's write time): every occurrence is one
 * delivery, and now - t its delay, kept in a 10 µs histogram. Same method as bench/events/viewers.ts, kept
 * here so this bench does not follow that one's changes.
 */
import net from 'node:net'
import { serve } from '../events/ipc.ts'

const MARK = Buffer.from('"t":')
const BUCKET_MS = 0.01
const BUCKETS = 500_000 // 5 s; anything later goes to the last bucket
const histogram = new Uint32Array(BUCKETS + 1)
let deliveries = 0
let maxDelay = 0
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
    deliveries++
    // A number cut by the chunk's end is counted but not timed.
    if (end < chunk.length) {
      const delay = now - Number(chunk.toString('latin1', at + MARK.length, end))
      if (delay > maxDelay) maxDelay = delay
      const bucket = Math.min(BUCKETS, Math.max(0, Math.floor(delay / BUCKET_MS)))
      histogram[bucket] = (histogram[bucket] ?? 0) + 1
    }
    at = chunk.indexOf(MARK, end)
  }
}

function percentile(p: number): number {
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
  reset: () => {
    histogram.fill(0)
    deliveries = 0
    maxDelay = 0
    return null
  },
  stats: () => ({
    deliveries,
    p50: percentile(0.5),
    p99: percentile(0.99),
    max: maxDelay,
    open: sockets.size,
    ended,
  }),
  close: () => {
    for (const s of sockets) s.destroy()
    sockets.clear()
    return null
  },
})
