/**
 * A probe for a bench replica, loaded with `--node-args "--import ./bench/probes/stages.mjs"`: it subscribes to
 * the gateway's event diagnostics channels (`src/events/diagnostics.ts`) and times every bench event (its
 * `"t":<ms>` field, the runtime's clock when written) where it passes: `read` (the reader parsed it from the
 * runtime), `stored` (the append answered) and `hub` (a replica's hub got it, before its viewers). Each
 * second's delays go into a histogram of 5% buckets; `$KRG_PROBE_DIR/<pid>-stages.json` (default the
 * system's temp dir) is written when the process exits, and `node bench/probes/stages-summary.mjs <dir>`
 * prints the percentiles per process and stage, over the bench's measured phase when given its window.
 */
import diagnostics from 'node:diagnostics_channel'
import { writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** Bucket k holds delays from FLOOR_MS * GROWTH^k; below FLOOR_MS, bucket 0. */
const FLOOR_MS = 0.01
const GROWTH = 1.05
const T = /"t":([0-9.]+)/

const rows = []
let current = { at: Math.floor(Date.now() / 1000), stages: {} }

function record(stage, data) {
  const match = T.exec(data)
  if (match === null) return
  const delay = performance.timeOrigin + performance.now() - Number(match[1])
  const second = Math.floor(Date.now() / 1000)
  if (second !== current.at) {
    rows.push(current)
    current = { at: second, stages: {} }
  }
  const bucket = delay <= FLOOR_MS ? 0 : Math.floor(Math.log(delay / FLOOR_MS) / Math.log(GROWTH))
  current.stages[stage] ??= {}
  const histogram = current.stages[stage]
  histogram[bucket] = (histogram[bucket] ?? 0) + 1
}

const messagesOf = (stage) => (message) => {
  for (const m of message.messages) if (m.kind === 'event') record(stage, m.data)
}
diagnostics.subscribe('krg:events:read', messagesOf('read'))
diagnostics.subscribe('krg:events:stored', messagesOf('stored'))
diagnostics.subscribe('krg:events:hub', (message) => {
  for (const d of message.deliveries) if (d.message.kind === 'event') record('hub', d.message.data)
})

const file = join(process.env.KRG_PROBE_DIR ?? tmpdir(), `${process.pid}-stages.json`)
process.on('exit', () => {
  rows.push(current)
  writeFileSync(file, JSON.stringify({ floorMs: FLOOR_MS, growth: GROWTH, rows }))
})
