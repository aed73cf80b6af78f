/**
 * Where an idle viewer's memory goes: connects N viewers to the gateway (or the raw ceiling) and prints the
 * growth of RSS and of each `process.memoryUsage()` field per viewer, after a full GC; optionally writes heap
 * snapshots before and after (`<path>.0` and `<path>`) to diff in DevTools.
 *
 *   npx tsx bench/events/memory-probe.ts [viewers=2000] [gateway|raw] [snapshot-path]
 */
import { Child } from '../common/ipc.ts'
import { sleep } from '../common/orchestrator.ts'
import { rssOf } from '../common/proc.ts'

const viewers = Number(process.argv[2] ?? 2000)
const raw = process.argv[3] === 'raw'
const snapshot = process.argv[4]

const emitter = new Child('common/emitter.ts')
const { url } = await emitter.call<{ url: string }>('info')
const server = new Child(raw ? 'events/raw-fanout.ts' : 'events/gateway-server.ts', { BENCH_UPSTREAM: url })
const client = new Child('events/viewers.ts')
try {
  const info = await server.call<{ port: number; pid: number; token?: string }>('info')
  await sleep(300)
  const before = await server.call<NodeJS.MemoryUsage>('mem')
  const rss0 = rssOf([info.pid])
  if (snapshot) await server.call('snapshot', { path: `${snapshot}.0` })
  const { connected } = await client.call<{ connected: number }>('connect', {
    port: info.port,
    path: raw ? '/events' : '/desktop/bench/mcp/events',
    headers: info.token ? { Authorization: `Bearer ${info.token}` } : {},
    count: viewers,
    batch: 250,
  })
  await sleep(1500)
  const after = await server.call<NodeJS.MemoryUsage>('mem')
  const rss1 = rssOf([info.pid])
  if (snapshot) await server.call('snapshot', { path: snapshot })
  process.stdout.write(`${raw ? 'raw' : 'gateway'}: ${connected} viewers\n`)
  process.stdout.write(`rss (from /proc): ${((rss1 - rss0) / connected / 1024).toFixed(2)} KiB per viewer\n`)
  for (const key of Object.keys(after) as (keyof NodeJS.MemoryUsage)[]) {
    process.stdout.write(`${key}: ${((after[key] - before[key]) / connected).toFixed(0)} B per viewer\n`)
  }
} finally {
  await client.call('close').catch(() => {})
  await client.stop()
  await server.stop()
  await emitter.stop()
}
