import assert from 'node:assert/strict'
import { createServer, type RequestListener, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type TestContext, test } from 'node:test'
import {
  type CryptoKey,
  exportJWK,
  exportSPKI,
  generateKeyPair,
  importJWK,
  type JWK,
  SignJWT,
  UnsecuredJWT,
} from 'jose'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { TEST_AUDIENCE, TEST_ISSUER, TEST_JWT_SECRET, testEnv } from '../helpers/jwt.ts'
import { auth, call, failures, startAuthGateway } from './harness.ts'

/** A real HTTP server on port 0; closed (with its open sockets) by `t.after`. */
async function serve(t: TestContext, handler: RequestListener): Promise<{ url: string; server: Server }> {
  const server = createServer(handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => stop(server))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`, server }
}

function stop(server: Server): Promise<void> {
  server.closeAllConnections()
  return new Promise((resolve) => server.close(() => resolve()))
}

interface Signer {
  kid: string
  alg: string
  privateKey: CryptoKey
  publicJwk: JWK
}

async function signer(alg: 'RS256' | 'ES256' | 'EdDSA', kid: string): Promise<Signer> {
  const { privateKey, publicKey } = await generateKeyPair(alg)
  return { kid, alg, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' } }
}

/** A JWKS server over the given keys, counting its fetches. */
async function jwksServer(t: TestContext, keys: Signer[]) {
  let fetches = 0
  const { url, server } = await serve(t, (_req, res) => {
    fetches++
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ keys: keys.map((k) => k.publicJwk) }))
  })
  return { url, server, fetches: () => fetches }
}

function token(s: Signer, claims: Record<string, unknown> = { roles: ['operator'], teams: ['*'] }) {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: s.alg, kid: s.kid })
    .setSubject('alice')
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .setExpirationTime('10m')
    .sign(s.privateKey)
}

/** JWKS-only gateway: the HS256 secret is unset. */
const jwksEnv = (url: string, extra: Record<string, string> = {}) => ({
  GATEWAY_JWT_SECRET: '',
  GATEWAY_JWKS_URL: url,
  ...extra,
})

test('JWKS: RS256, ES256 and EdDSA tokens from the key set are accepted', async (t) => {
  const rs = await signer('RS256', 'rs-1')
  const es = await signer('ES256', 'es-1')
  const ed = await signer('EdDSA', 'ed-1')
  const jwks = await jwksServer(t, [rs, es, ed])
  const gw = await startAuthGateway(t, jwksEnv(jwks.url))
  for (const s of [rs, es, ed]) {
    const res = await call(`${gw.url}/t/read`, { headers: auth(await token(s)) })
    assert.equal(res.status, 200, `${s.alg}: ${JSON.stringify(res.body)}`)
  }
  assert.equal(jwks.fetches(), 1, 'keys are cached')
})

test('JWKS: HS/RS confusion (HS256 signed with the RSA public key PEM), none, unknown kid, bad signature', async (t) => {
  const rs = await signer('RS256', 'rs-1')
  const jwks = await jwksServer(t, [rs])
  const gw = await startAuthGateway(t, jwksEnv(jwks.url))
  const pem = await exportSPKI(await publicKeyOf(rs))
  const confused = await new SignJWT({ roles: ['admin'], teams: ['*'] })
    .setProtectedHeader({ alg: 'HS256', kid: rs.kid })
    .setSubject('mallory')
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(pem))
  let res = await call(`${gw.url}/t/admin`, { method: 'POST', headers: auth(confused) })
  assert.equal(res.status, 401)
  assert.equal(res.body.error, 'invalid_credential')
  assert.equal(await failures(gw.app, 'alg'), 1)

  const none = new UnsecuredJWT({ roles: ['admin'] })
    .setSubject('mallory')
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .setExpirationTime('10m')
    .encode()
  res = await call(`${gw.url}/t/read`, { headers: auth(none) })
  assert.equal(res.status, 401)
  assert.equal(await failures(gw.app, 'alg'), 2)

  // First a good token so the set is fetched; then an unknown kid within the refetch cooldown.
  assert.equal((await call(`${gw.url}/t/read`, { headers: auth(await token(rs)) })).status, 200)
  const stranger = await signer('RS256', 'rs-unknown')
  res = await call(`${gw.url}/t/read`, { headers: auth(await token(stranger)) })
  assert.equal(res.status, 401)
  assert.equal(await failures(gw.app, 'unknown_key'), 1)

  // Same kid, other key: the signature does not verify.
  const impostor = { ...(await signer('RS256', 'rs-1')) }
  res = await call(`${gw.url}/t/read`, { headers: auth(await token(impostor)) })
  assert.equal(res.status, 401)
  assert.equal(await failures(gw.app, 'bad_signature'), 1)
})

test('JWKS: an algorithm outside GATEWAY_JWT_ALGORITHMS is refused', async (t) => {
  const rs = await signer('RS256', 'rs-1')
  const es = await signer('ES256', 'es-1')
  const jwks = await jwksServer(t, [rs, es])
  const gw = await startAuthGateway(t, jwksEnv(jwks.url, { GATEWAY_JWT_ALGORITHMS: 'RS256' }))
  assert.equal((await call(`${gw.url}/t/read`, { headers: auth(await token(rs)) })).status, 200)
  const res = await call(`${gw.url}/t/read`, { headers: auth(await token(es)) })
  assert.equal(res.status, 401)
  assert.equal(await failures(gw.app, 'alg'), 1)
})

test('JWKS: a symmetric algorithm or none in GATEWAY_JWT_ALGORITHMS is refused at boot', async () => {
  for (const algs of ['RS256,HS256', 'none']) {
    const config = loadConfig(
      testEnv(jwksEnv('http://127.0.0.1:9/jwks.json', { GATEWAY_JWT_ALGORITHMS: algs })),
    )
    await assert.rejects(async () => {
      const app = await buildApp(config)
      await app.close()
    }, /GATEWAY_JWT_ALGORITHMS/)
  }
})

test('JWKS unreachable (server stopped) is 503 jwks_unavailable, not 401', async (t) => {
  const rs = await signer('RS256', 'rs-1')
  const jwks = await jwksServer(t, [rs])
  await stop(jwks.server)
  const gw = await startAuthGateway(t, jwksEnv(jwks.url))
  const res = await call(`${gw.url}/t/read`, { headers: auth(await token(rs)) })
  assert.equal(res.status, 503)
  assert.equal(res.body.error, 'jwks_unavailable')
  assert.equal(await failures(gw.app, 'jwks_unavailable'), 1)
})

test('JWKS answering 500 or not JSON is 503 jwks_unavailable', async (t) => {
  const rs = await signer('RS256', 'rs-1')
  for (const [status, body] of [
    [500, 'oops'],
    [200, '<html>'],
  ] as const) {
    const { url } = await serve(t, (_req, res) => {
      res.writeHead(status, { 'content-type': 'text/plain' })
      res.end(body)
    })
    const gw = await startAuthGateway(t, jwksEnv(url))
    const res = await call(`${gw.url}/t/read`, { headers: auth(await token(rs)) })
    assert.equal(res.status, 503, `${status} ${body}`)
    assert.equal(res.body.error, 'jwks_unavailable')
  }
})

test('JWKS that never answers is 503 jwks_unavailable after GATEWAY_JWKS_TIMEOUT_MS', async (t) => {
  const rs = await signer('RS256', 'rs-1')
  const { url } = await serve(t, () => {
    // Never answers; the socket is closed by stop() in t.after.
  })
  const gw = await startAuthGateway(t, jwksEnv(url, { GATEWAY_JWKS_TIMEOUT_MS: '300' }))
  const res = await call(`${gw.url}/t/read`, { headers: auth(await token(rs)) })
  assert.equal(res.status, 503)
  assert.equal(res.body.error, 'jwks_unavailable')
})

test('secret and JWKS together: HS256 checks against the secret only, RS256 against the JWKS', async (t) => {
  const rs = await signer('RS256', 'rs-1')
  const jwks = await jwksServer(t, [rs])
  const gw = await startAuthGateway(t, { GATEWAY_JWKS_URL: jwks.url })
  const hs = await new SignJWT({ roles: ['operator'], teams: ['*'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('alice')
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(TEST_JWT_SECRET))
  assert.equal((await call(`${gw.url}/t/read`, { headers: auth(hs) })).status, 200)
  assert.equal((await call(`${gw.url}/t/read`, { headers: auth(await token(rs)) })).status, 200)
  const pem = await exportSPKI(await publicKeyOf(rs))
  const confused = await new SignJWT({ roles: ['admin'] })
    .setProtectedHeader({ alg: 'HS256', kid: rs.kid })
    .setSubject('mallory')
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(pem))
  const res = await call(`${gw.url}/t/read`, { headers: auth(confused) })
  assert.equal(res.status, 401)
  assert.equal(await failures(gw.app, 'bad_signature'), 1)
})

/** The public key as an extractable CryptoKey, to export its PEM for the confusion attack. */
async function publicKeyOf(s: Signer): Promise<CryptoKey> {
  return (await importJWK(s.publicJwk, s.alg, { extractable: true })) as CryptoKey
}
