import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startGateway } from '../helpers/gateway.ts'

// A loaded run saw the pages plugin take more than Fastify's default 10 s to start, which failed the boot: a
// slow boot is not a broken one (src/app.ts). Fastify reports the setting it was built with.
test('a plugin may take a minute to start, not Fastify’s 10 s', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  assert.equal(gw.app.initialConfig.pluginTimeout, 60_000)
})
