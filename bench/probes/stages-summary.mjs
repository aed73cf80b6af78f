/**
 * Prints what `stages.mjs` recorded: per process and stage, the events timed and their delay's p50, p90, p99
 * and p99.9 in ms since the runtime wrote them (each a bucket's lower edge, 5% wide). With `--from` and `--to`
 * (epoch ms, the `phase` window in a cluster bench result's raw numbers) only those seconds count.
 *
 *   node bench/probes/stages-summary.mjs <dir> [--from <ms> --to <ms>]
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const [dir, ...rest] = process.argv.slice(2)
if (dir === undefined) throw new Error('usage: stages-summary.mjs <dir> [--from <ms> --to <ms>]')
const flag = (name) => {
  const i = rest.indexOf(name)
  return i === -1 ? undefined : Number(rest[i + 1])
}
const from = flag('--from') ?? 0
const to = flag('--to') ?? Number.POSITIVE_INFINITY

const percentile = (buckets, total, p, edge) => {
  const want = Math.ceil(total * p)
  let seen = 0
  for (const [k, n] of buckets) {
    seen += n
    if (seen >= want) return edge(k)
  }
  return Number.NaN
}

console.log('process\tstage\tevents\tp50\tp90\tp99\tp99.9 (ms)')
for (const name of readdirSync(dir)
  .filter((f) => f.endsWith('-stages.json'))
  .sort()) {
  const { floorMs, growth, rows } = JSON.parse(readFileSync(join(dir, name), 'utf8'))
  const edge = (k) => (k === 0 ? 0 : floorMs * growth ** k)
  const merged = new Map()
  for (const row of rows) {
    // A second counts when it lies wholly inside the window.
    if (row.at * 1000 < from || (row.at + 1) * 1000 > to) continue
    for (const [stage, histogram] of Object.entries(row.stages)) {
      const m = merged.get(stage) ?? new Map()
      for (const [k, n] of Object.entries(histogram)) m.set(Number(k), (m.get(Number(k)) ?? 0) + n)
      merged.set(stage, m)
    }
  }
  for (const stage of ['read', 'stored', 'hub']) {
    const m = merged.get(stage)
    if (m === undefined) continue
    const buckets = [...m].sort((a, b) => a[0] - b[0])
    const total = buckets.reduce((sum, [, n]) => sum + n, 0)
    const q = (p) => percentile(buckets, total, p, edge).toFixed(2)
    console.log(`${name.split('-')[0]}\t${stage}\t${total}\t${q(0.5)}\t${q(0.9)}\t${q(0.99)}\t${q(0.999)}`)
  }
}
