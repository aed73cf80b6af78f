import assert from 'node:assert/strict'
import { test } from 'node:test'
import { waitFor } from '../helpers/wait.ts'
import { send, startProxy } from '../upstream/support.ts'

test('an overloaded replica sheds every request but the probes with 503 overloaded, in our shape', async (t) => {
  // A heap threshold of one byte: the replica is over it from its first sample on.
  const { gw, echo, auth } = await startProxy(t, { GATEWAY_OVERLOAD_HEAP_USED_BYTES: '1' })
  await waitFor('the first pressure sample', () => gw.app.pressure?.over() === 'heapUsedBytes')
  for (const path of [
    '/desktop/k1/mcp/inbox',
    '/desktop/k1/mcp/events',
    '/auth/me',
    '/admin/sessions',
    '/nope',
  ]) {
    const res = await send(gw.url, { path, headers: { authorization: auth.operator } })
    assert.equal(res.status, 503, path)
    assert.deepEqual(JSON.parse(res.text), {
      error: 'overloaded',
      message: 'this replica is overloaded; retry shortly',
      requestId: res.headers['x-request-id'],
    })
    assert.equal(res.headers['retry-after'], '5', path)
  }
  assert.equal(echo.received.length, 0, 'nothing shed reached the runtime')
  for (const path of ['/healthz', '/readyz', '/metrics']) {
    const res = await send(gw.url, { path })
    assert.equal(res.status, 200, path)
  }
  assert.match(
    await gw.app.metrics.registry.getSingleMetricAsString('krg_requests_shed_total'),
    /reason="heapUsedBytes"\} 5/,
  )
})

test('with the thresholds at 0 nothing is shed', async (t) => {
  const { gw, auth } = await startProxy(t, {
    GATEWAY_OVERLOAD_HEAP_USED_BYTES: '0',
    GATEWAY_OVERLOAD_LOOP_DELAY_MS: '0',
  })
  // Nothing to sample, nothing to shed.
  assert.equal(gw.app.pressure, null)
  const res = await send(gw.url, { path: '/desktop/k1/mcp/inbox', headers: { authorization: auth.operator } })
  assert.equal(res.status, 200)
})
