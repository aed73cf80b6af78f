/**
 * The viewer side of both benches: N SSE viewers on raw TCP sockets (the cheapest client, so the machine's
 * two cores go to the servers under test). Each chunk read is scanned for the events' `"t":<ms>` field (the
 * emitter's write time): every occurrence is one delivery, and now - t its delay, kept in a 10 µs histogram.
 * The child scripts (bench/events/viewers.ts, bench/cluster/viewers.ts) only decide what is recorded when.
 */
import net from 'node:net'

const MARK = Buffer.from('"t":')
const BUCKET_MS = 0.01
const BUCKETS = 500_000 // 5 s; anything later goes to the last bucket

/** Deliveries and their delays, as recorded over some span. */
export class Recording {
  readonly histogram = new Uint32Array(BUCKETS + 1)
  deliveries = 0
  max = 0

  reset(): void {
    this.histogram.fill(0)
    this.deliveries = 0
    this.max = 0
  }

  /** The delay at quantile `p` (0..1), mid-bucket; NaN when nothing was timed. */
  percentile(p: number): number {
    let total = 0
    for (const n of this.histogram) total += n
    if (total === 0) return Number.NaN
    const want = Math.ceil(total * p)
    let seen = 0
    for (let i = 0; i < this.histogram.length; i++) {
      seen += this.histogram[i] as number
      if (seen >= want) return (i + 0.5) * BUCKET_MS
    }
    return Number.NaN
  }

  /** One recording holding every delivery of `parts` (the viewers of several replicas together). */
  static merged(parts: Iterable<Recording>): Recording {
    const all = new Recording()
    for (const part of parts) {
      all.deliveries += part.deliveries
      all.max = Math.max(all.max, part.max)
      for (let i = 0; i < all.histogram.length; i++)
        all.histogram[i] = (all.histogram[i] as number) + (part.histogram[i] as number)
    }
    return all
  }

  summary(): { deliveries: number; p50: number; p99: number; max: number } {
    return {
      deliveries: this.deliveries,
      p50: this.percentile(0.5),
      p99: this.percentile(0.99),
      max: this.max,
    }
  }
}

/** What the orchestrator's `connect` command carries. */
export interface ConnectArgs {
  port: number
  path: string
  headers: Record<string, string>
  count: number
  batch: number
}

/** The open viewer sockets; every delivery goes to `recording(port)`, port the viewer's (null: dropped). */
export class Viewers {
  readonly #sockets = new Set<net.Socket>()
  readonly #recording: (port: number) => Recording | null
  /** Viewers whose socket closed while it was open (the server ended it, or it failed). */
  ended = 0

  constructor(recording: (port: number) => Recording | null) {
    this.#recording = recording
  }

  get open(): number {
    return this.#sockets.size
  }

  /** Opens `count` viewers, `batch` at a time; says how many got a 200. */
  async connect(args: ConnectArgs): Promise<{ connected: number; failed: number }> {
    const { port, path, headers, count, batch } = args
    const lines = [`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, 'Accept: text/event-stream']
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
    const request = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`)
    let ok = 0
    for (let done = 0; done < count; done += batch) {
      const results = await Promise.all(
        Array.from({ length: Math.min(batch, count - done) }, () => this.#open(port, request)),
      )
      ok += results.filter(Boolean).length
    }
    return { connected: ok, failed: count - ok }
  }

  close(): null {
    for (const s of this.#sockets) s.destroy()
    this.#sockets.clear()
    return null
  }

  /** Opens one viewer; resolves true once a 200 response head arrived. */
  #open(port: number, request: Buffer): Promise<boolean> {
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
        this.#onData(chunk, port)
      })
      socket.on('error', () => settle(false))
      socket.on('close', () => {
        settle(false)
        if (this.#sockets.delete(socket)) this.ended++
      })
      this.#sockets.add(socket)
    })
  }

  #onData(chunk: Buffer, port: number): void {
    const now = performance.timeOrigin + performance.now()
    const record = this.#recording(port)
    let at = chunk.indexOf(MARK)
    while (at !== -1) {
      let end = at + MARK.length
      while (end < chunk.length) {
        const c = chunk[end] as number
        if ((c < 48 || c > 57) && c !== 46) break
        end++
      }
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
}
