import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Histogram, Registry } from 'prom-client'
import { LabelledHistogram } from '../../src/metrics/labelled-histogram.ts'

const options = {
  name: 'krg_test_duration_seconds',
  help: 'A test histogram',
  labelNames: ['route', 'status'] as const,
  buckets: [0.01, 0.1, 1],
}

/** The same observations into prom-client's Histogram and ours, each in its own registry. */
function both() {
  const theirs = new Registry()
  const ours = new Registry()
  const reference = new Histogram({ ...options, labelNames: [...options.labelNames], registers: [theirs] })
  const fast = new LabelledHistogram({ ...options, registers: [ours] })
  return {
    observe(labels: { route: string; status: string }, value: number) {
      reference.observe(labels, value)
      fast.observe(labels, value)
    },
    theirs,
    ours,
    fast,
  }
}

/** A scrape's lines with each line's labels in one order (prom-client puts `le` first, we last). */
function lines(exposition: string): string[] {
  return exposition
    .split('\n')
    .map((line) =>
      line.replace(/\{([^}]*)\}/, (_, inner: string) => `{${inner.split(',').sort().join(',')}}`),
    )
}

test("the labelled histogram scrapes exactly as prom-client's Histogram for the same observations", async () => {
  const h = both()
  const values = [0, 0.005, 0.01, 0.0100001, 0.05, 0.1, 0.5, 1, 1.5, 30]
  for (const [i, value] of values.entries()) {
    h.observe({ route: '/desktop/:kasmId/mcp/inbox', status: i % 3 === 0 ? '200' : '502' }, value)
    h.observe({ route: 'unmatched', status: '404' }, value / 2)
  }
  const [theirs, ours] = [await h.theirs.metrics(), await h.ours.metrics()]
  assert.deepEqual(lines(ours), lines(theirs))
  assert.match(ours, /krg_test_duration_seconds_bucket\{route="unmatched",status="404",le="\+Inf"\} 10/)
  // prom-client adds `exemplar: null` to each bucket (no exemplars here); everything else is the same.
  const reference = (await h.theirs.getMetricsAsJSON()).map((metric) => ({
    ...metric,
    values: metric.values.map((value) => {
      const { exemplar, ...rest } = value as typeof value & { exemplar?: unknown }
      assert.equal(exemplar ?? null, null)
      return rest
    }),
  }))
  assert.deepEqual(await h.ours.getMetricsAsJSON(), reference)
})

test('a reset forgets every series; a value that is not a finite number is refused', async () => {
  const h = both()
  h.observe({ route: 'r', status: '200' }, 0.2)
  h.theirs.resetMetrics()
  h.ours.resetMetrics()
  assert.deepEqual(lines(await h.ours.metrics()), lines(await h.theirs.metrics()))
  assert.equal((await h.fast.get()).values.length, 0)
  for (const bad of [Number.NaN, Number.POSITIVE_INFINITY])
    assert.throws(() => h.fast.observe({ route: 'r', status: '200' }, bad), TypeError)
})
