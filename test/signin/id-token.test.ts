import assert from 'node:assert/strict'
import { createSecretKey } from 'node:crypto'
import { type TestContext, test } from 'node:test'
import { SignJWT, UnsecuredJWT } from 'jose'
import { request } from 'undici'
import type { AuditRecord } from '../../src/audit/types.ts'
import { freePort } from '../cluster/redis-harness.ts'
import { bearer } from '../helpers/jwt.ts'
import { Browser, CLIENT_SECRET, type SignInStack, signInAt, startSignInStack } from './harness.ts'
import { type IdpRewrites, jwtClaims, startIdpStandIn } from './idp-stand-in.ts'

/**
 * ID tokens the gateway refuses are the sign-in's fault (400 `signin_token_invalid`, the check that failed in
 * the audit record), never the IdP refusing the gateway (502 `idp_refused`), which is kept for the IdP's own
 * refusals. Each token comes from a stand-in for an IdP that issues it: the real OpenID provider behind a proxy
 * that re-signs its ID token as such an IdP would, and advertises the algorithm in its discovery document.
 */

async function audit(stack: SignInStack): Promise<AuditRecord[]> {
  const admin = `Bearer ${await bearer({ roles: ['admin'] })}`
  const res = await request(`${stack.base}admin/audit?limit=50`, { headers: { authorization: admin } })
  return ((await res.body.json()) as { records: AuditRecord[] }).records
}

/** A gateway whose IdP answers through `rewrites`; a person signs in (a navigation, as a browser does). */
async function signInThrough(t: TestContext, rewrites: IdpRewrites) {
  const port = await freePort()
  const stack = await startSignInStack(t, { idp: { issuer: `http://127.0.0.1:${port}` } })
  const standIn = await startIdpStandIn(t, port, stack.idp.url, rewrites)
  const browser = new Browser()
  const page = await signInAt(stack, browser)
  const record = (await audit(stack)).find((r) => r.route === 'auth/callback')
  return { stack, standIn, browser, page, record }
}

/** Discovery that also lists `alg` for ID tokens, as an IdP that issues them does. */
const advertising =
  (alg: string) =>
  (metadata: Record<string, unknown>): Record<string, unknown> => ({
    ...metadata,
    id_token_signing_alg_values_supported: [
      ...((metadata.id_token_signing_alg_values_supported as string[] | undefined) ?? []),
      alg,
    ],
  })

const unsigned = (body: Record<string, unknown>) => ({
  ...body,
  id_token: new UnsecuredJWT(jwtClaims(String(body.id_token))).encode(),
})

/** HS256 with the client secret as the key: what an IdP does for a client registered for symmetric tokens. */
const symmetric = async (body: Record<string, unknown>) => ({
  ...body,
  id_token: await new SignJWT(jwtClaims(String(body.id_token)))
    .setProtectedHeader({ alg: 'HS256' })
    .sign(createSecretKey(Buffer.from(CLIENT_SECRET))),
})

const cases: [string, IdpRewrites, RegExp][] = [
  ['alg none, advertised', { discovery: advertising('none'), token: unsigned }, /alg none/],
  ['alg none, not advertised', { token: unsigned }, /alg none/],
  [
    'HS256 with the client secret, advertised',
    { discovery: advertising('HS256'), token: symmetric },
    /HS256/,
  ],
]

for (const [name, rewrites, reason] of cases) {
  test(`an ID token with ${name} is signin_token_invalid (400), the reason in the audit`, async (t) => {
    const { standIn, browser, page, record } = await signInThrough(t, rewrites)
    assert.equal(standIn.rewritten.token, 1, 'the stand-in issued the token')
    assert.equal(page.status, 400)
    assert.match(page.text, /<h1>Sign-in failed<\/h1>/)
    assert.match(page.text, /did not pass the gateway&#39;s checks/)
    assert.match(page.text, /signin_token_invalid/)
    assert.equal(browser.cookies.has('krg_session'), false, 'no session')
    assert.deepEqual(
      [record?.status, record?.outcome, record?.error],
      [400, 'refused', 'signin_token_invalid'],
    )
    assert.match(record?.reason ?? '', reason)
  })
}

test('the IdP refusing the gateway itself (a wrong client secret) stays 502 idp_refused', async (t) => {
  const stack = await startSignInStack(t, {
    env: { GATEWAY_OIDC_CLIENT_SECRET: 'not-the-registered-secret' },
  })
  const browser = new Browser()
  const page = await signInAt(stack, browser)
  assert.equal(page.status, 502)
  assert.match(page.text, /refused the gateway/)
  assert.match(page.text, /idp_refused/)
  const record = (await audit(stack)).find((r) => r.route === 'auth/callback')
  assert.deepEqual([record?.status, record?.error], [502, 'idp_refused'])
  assert.match(record?.reason ?? '', /invalid_client/)
})
