import { test } from 'node:test'
import { startGateway } from './test/helpers/gateway.ts'
test('x', async () => {
  for (let i = 0; i < 6; i++) {
    const c0 = process.cpuUsage(); const t0 = Date.now()
    const gw = await startGateway()
    const c = process.cpuUsage(c0)
    console.log(i, 'build+listen cpu ms', ((c.user + c.system) / 1000).toFixed(0), 'wall', Date.now() - t0)
    await gw.close()
  }
})
