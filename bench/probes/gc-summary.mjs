/**
 * Prints what `gc-per-second.mjs` recorded in a directory: per process, each second's collections as
 * `count/total ms/longest ms` and the event loop's p99 delay, the processes side by side.
 * Usage: `node bench/probes/gc-summary.mjs <dir> [last seconds, default 60]`.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const [dir, lastArg] = process.argv.slice(2)
if (dir === undefined) throw new Error('usage: gc-summary.mjs <dir> [last seconds]')
const files = readdirSync(dir).filter((f) => f.endsWith('.json'))
const bySecond = files.map(
  (f) => new Map(JSON.parse(readFileSync(join(dir, f), 'utf8')).map((r) => [Math.floor(r.at / 1000), r])),
)
const seconds = [...new Set(bySecond.flatMap((m) => [...m.keys()]))]
  .sort((a, b) => a - b)
  .slice(-Number(lastArg ?? 60))
console.log(['second', ...files].join('\t'))
for (const s of seconds) {
  const cells = bySecond.map((m) => {
    const r = m.get(s)
    return r === undefined ? '' : `${r.n}/${r.total.toFixed(1)}/${r.max.toFixed(1)} p99 ${r.p99.toFixed(1)}`
  })
  console.log([s, ...cells].join('\t'))
}
