/**
 * A probe for a bench child, loaded with `--node-args "--import ./bench/probes/gc-per-second.mjs"`: every
 * second it records the event loop's delay (p50, p99, max, at 1 ms resolution) and the garbage collections
 * (count, total and longest pause, of which major), and writes them to
 * `$KRG_PROBE_DIR/<pid>-<script>.json` (default the system's temp dir) when the process exits.
 * `node bench/probes/gc-summary.mjs <dir>` prints them per second.
 */
import { writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks'

const MINOR = 1
const delay = monitorEventLoopDelay({ resolution: 1 })
delay.enable()
const fresh = () => ({ n: 0, total: 0, max: 0, major: 0, majorTotal: 0 })
let gc = fresh()
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gc.n++
    gc.total += e.duration
    gc.max = Math.max(gc.max, e.duration)
    if (e.detail?.kind !== MINOR) {
      gc.major++
      gc.majorTotal += e.duration
    }
  }
}).observe({ entryTypes: ['gc'] })
const rows = []
setInterval(() => {
  const ms = (ns) => ns / 1e6
  rows.push({
    at: Date.now(),
    p50: ms(delay.percentile(50)),
    p99: ms(delay.percentile(99)),
    max: ms(delay.max),
    ...gc,
  })
  delay.reset()
  gc = fresh()
}, 1000).unref()
const file = join(
  process.env.KRG_PROBE_DIR ?? tmpdir(),
  `${process.pid}-${basename(process.argv[1] ?? 'node')}.json`,
)
process.on('exit', () => writeFileSync(file, JSON.stringify(rows)))
