import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { openSse, type SseClient, until } from '../events/helpers.ts'
import {
  type Browser,
  type SignInStack,
  signedIn,
  startReplicaOf,
  startSignInStack,
} from '../signin/harness.ts'

/**
 * A revoked cookie session loses its overview streams at once on every replica, as it loses its event streams:
 * the periodic recheck is set to a minute here, so it cannot be what ends them.
 */

/**
 * How long a test waits for streams that end at once: generous for a loaded machine, and half the periodic
 * recheck (a minute), so a revocation only the recheck noticed fails.
 */
const AT_ONCE_MS = 30_000

const slowRecheck = { GATEWAY_STREAM_AUTH_RECHECK_MS: '60000', GATEWAY_STREAM_LINGER_MS: '0' }

async function overview(origin: string, cookie: string): Promise<SseClient> {
  const sse = await openSse(`${origin}/api/overview`, { cookie })
  assert.equal(sse.status, 200)
  await until('the snapshot', () => sse.events.some((e) => e.event === 'ready'))
  return sse
}

/** The person signs out at the IdP itself (not through the gateway): the IdP posts a logout token. */
async function signOutAtIdp(stack: SignInStack, browser: Browser): Promise<void> {
  const confirm = await browser.navigate(`${stack.idp.issuer}/session/end`)
  await browser.submit(confirm, '/session/end/confirm', { logout: 'yes' })
}

test('a back-channel logout ends the open overview of that IdP session at once, and no other', async (t) => {
  const stack = await startSignInStack(t, { env: slowRecheck })
  const { browser, cookie } = await signedIn(stack)
  const mine = await overview(stack.origin, cookie)
  t.after(() => mine.close())
  // The same person in another browser (another IdP session) keeps theirs.
  const theirs = await overview(stack.origin, (await signedIn(stack)).cookie)
  t.after(() => theirs.close())
  assert.equal(stack.app.overview.hub.stats().streams, 2)

  await signOutAtIdp(stack, browser)
  await until('the overview ended', () => mine.isEnded, AT_ONCE_MS)
  assert.equal(theirs.isEnded, false)
  await until('the hub let it go', () => stack.app.overview.hub.stats().streams === 1)
  // Its reconnect is refused.
  const again = await openSse(`${stack.origin}/api/overview`, { cookie })
  assert.equal(again.status, 401)
})

test('cluster mode: a back-channel logout reaching one replica ends the overview on another at once', async (t) => {
  const env = { ...slowRecheck, ...sharedRedisEnv(t) }
  const a = await startSignInStack(t, { env })
  const b = await startReplicaOf(t, a, env)

  const { browser, cookie } = await signedIn(a)
  const onB = await overview(b.origin, cookie)
  t.after(() => onB.close())
  const onA = await overview(a.origin, cookie)
  t.after(() => onA.close())
  const survivor = await overview(b.origin, (await signedIn(a)).cookie)
  t.after(() => survivor.close())

  // The IdP posts the logout token to the registered URI: replica A.
  await signOutAtIdp(a, browser)
  await until('the overviews on both replicas ended', () => onA.isEnded && onB.isEnded, AT_ONCE_MS)
  assert.equal(survivor.isEnded, false, 'only that IdP session')
  const me = await request(`${b.origin}/auth/me`, { headers: { cookie } })
  assert.equal(me.statusCode, 401)
  await me.body.dump()
})
