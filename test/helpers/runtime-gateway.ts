import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import {
  type SimulatedRuntime,
  type SimulatedRuntimeOptions,
  startSimulatedRuntime,
} from '../../src/dev/runtime/index.ts'
import { startGateway, type TestGateway } from './gateway.ts'
import { bearer } from './jwt.ts'

/** The messaging token of {@link gatewayWithRuntime}'s session. */
export const RUNTIME_TOKEN = 'tok-runtime-secret'

/**
 * A real gateway (in process, port 0) with a real simulated runtime registered through the admin API as `k1`
 * of team `blue`; both closed by `t.after`.
 */
export async function gatewayWithRuntime(
  t: TestContext,
  options: {
    env?: Record<string, string>
    logger?: NonNullable<Parameters<typeof startGateway>[1]>['logger']
    runtime?: Omit<SimulatedRuntimeOptions, 'messagingToken'>
  } = {},
): Promise<{ gw: TestGateway; runtime: SimulatedRuntime }> {
  const runtime = await startSimulatedRuntime({ ...options.runtime, messagingToken: RUNTIME_TOKEN })
  t.after(() => runtime.close())
  const gw = await startGateway(
    options.env ?? {},
    options.logger === undefined ? {} : { logger: options.logger },
  )
  t.after(() => gw.close())
  const admin = await bearer({ sub: 'root', roles: ['admin'] })
  const registered = await fetch(`${gw.url}/admin/sessions/k1`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ upstream: runtime.url, team: 'blue', messagingToken: RUNTIME_TOKEN }),
  })
  assert.equal(registered.status, 201)
  return { gw, runtime }
}
