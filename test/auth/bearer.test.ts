import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import { generateKeyPair, SignJWT, UnsecuredJWT } from 'jose'
import { bearer, TEST_AUDIENCE, TEST_ISSUER, TEST_JWT_SECRET } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'
import { type AuthGateway, auth, call, failures, startAuthGateway } from './harness.ts'

// The file's tests share what its hooks set up: a suite, so that a shard's other files do not.
describe('bearer tokens', () => {
  const secret = new TextEncoder().encode(TEST_JWT_SECRET)
  let gw: AuthGateway
  const cleanup: Array<() => unknown> = []

  before(async () => {
    gw = await startAuthGateway({ after: (fn) => cleanup.push(fn) })
  })
  after(async () => {
    for (const fn of cleanup) await fn()
  })

  /** Asserts a 401 invalid_credential with the metric for `reason` counted once more. */
  async function refused(token: string, reason: string, messagePart: RegExp): Promise<void> {
    const before = await failures(gw.app, reason)
    const res = await call(`${gw.url}/t/read`, { headers: auth(token) })
    assert.equal(res.status, 401, `${reason}: ${JSON.stringify(res.body)}`)
    assert.equal(res.body.error, 'invalid_credential')
    assert.match(String(res.body.message), messagePart)
    assert.equal(await failures(gw.app, reason), before + 1, `metric for ${reason}`)
  }

  test('a valid HS256 bearer reads and writes; /auth/me says who', async () => {
    const token = await bearer({ sub: 'alice', roles: ['operator'], teams: ['red'], name: 'Alice' })
    const read = await call(`${gw.url}/t/read`, { headers: auth(token) })
    assert.equal(read.status, 200)
    assert.deepEqual(read.body, { sub: 'alice', via: 'bearer' })
    const write = await call(`${gw.url}/t/write`, { method: 'POST', headers: auth(token) })
    assert.equal(write.status, 200)
    const me = await call(`${gw.url}/auth/me`, { headers: auth(token) })
    assert.equal(me.status, 200)
    assert.equal(me.body.sub, 'alice')
    assert.equal(me.body.name, 'Alice')
    assert.deepEqual(me.body.roles, ['operator'])
    assert.deepEqual(me.body.teams, ['red'])
    assert.equal(me.body.via, 'bearer')
    const exp = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp as number
    assert.equal(me.body.expiresAt, new Date(exp * 1000).toISOString())
  })

  test('no credential is 401 unauthenticated', async () => {
    const before = await failures(gw.app, 'missing')
    const reachedBefore = gw.reached.get('read') ?? 0
    const res = await call(`${gw.url}/t/read`)
    assert.equal(res.status, 401)
    assert.equal(res.body.error, 'unauthenticated')
    assert.equal(await failures(gw.app, 'missing'), before + 1)
    assert.equal(gw.reached.get('read') ?? 0, reachedBefore, 'the refused request never reached the route')
  })

  test('an Authorization header that is not "Bearer <jwt>" is refused as malformed', async () => {
    const before = await failures(gw.app, 'malformed')
    const basic = await call(`${gw.url}/t/read`, { headers: { authorization: 'Basic YWxpY2U6cHc=' } })
    assert.equal(basic.status, 401)
    assert.equal(basic.body.error, 'invalid_credential')
    await refused('not-a-jwt', 'malformed', /well-formed/)
    assert.equal(await failures(gw.app, 'malformed'), before + 2)
  })

  test('alg none is refused', async () => {
    const token = new UnsecuredJWT({ roles: ['admin'], teams: ['*'] })
      .setSubject('mallory')
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setExpirationTime('10m')
      .encode()
    await refused(token, 'alg', /algorithm/)
  })

  test('HS384/HS512 with the right secret and RS256 are refused: HS256 only for the secret', async () => {
    const hs512 = await new SignJWT({ roles: ['admin'] })
      .setProtectedHeader({ alg: 'HS512' })
      .setSubject('mallory')
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setExpirationTime('10m')
      .sign(secret)
    await refused(hs512, 'alg', /algorithm/)
    const { privateKey } = await generateKeyPair('RS256')
    const rs = await new SignJWT({ roles: ['admin'] })
      .setProtectedHeader({ alg: 'RS256' })
      .setSubject('mallory')
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setExpirationTime('10m')
      .sign(privateKey)
    await refused(rs, 'alg', /algorithm/)
  })

  test('an expired token is refused; within the clock tolerance it is accepted', async () => {
    const now = Math.floor(Date.now() / 1000)
    await refused(await bearer({}, { expiresIn: now - 3600 }), 'expired', /expired/)
    // Default GATEWAY_JWT_CLOCK_TOLERANCE_S is 30.
    const justExpired = await bearer({}, { expiresIn: now - 5 })
    assert.equal((await call(`${gw.url}/t/read`, { headers: auth(justExpired) })).status, 200)
  })

  test('with no clock tolerance a just-expired token is refused', async (t) => {
    const strict = await startAuthGateway(t, { GATEWAY_JWT_CLOCK_TOLERANCE_S: '0' })
    const justExpired = await bearer({}, { expiresIn: Math.floor(Date.now() / 1000) - 5 })
    const res = await call(`${strict.url}/t/read`, { headers: auth(justExpired) })
    assert.equal(res.status, 401)
    assert.equal(await failures(strict.app, 'expired'), 1)
  })

  test('a token not valid yet (nbf) is refused', async () => {
    const token = await new SignJWT({ roles: ['operator'] })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('alice')
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setNotBefore('1h')
      .setExpirationTime('2h')
      .sign(secret)
    await refused(token, 'not_yet_valid', /not valid yet/)
  })

  /** An HS256 token with the test secret and the given issuer and audience. */
  function signed(iss: string, aud: string): Promise<string> {
    return new SignJWT({ roles: ['admin'], teams: ['*'] })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('alice')
      .setIssuer(iss)
      .setAudience(aud)
      .setExpirationTime('10m')
      .sign(secret)
  }

  test('a wrong issuer is refused', async () => {
    await refused(await signed('https://evil.test', TEST_AUDIENCE), 'wrong_issuer', /issuer/)
  })

  test('a wrong audience is refused', async () => {
    await refused(await signed(TEST_ISSUER, 'someone-else'), 'wrong_audience', /audience/)
  })

  test('a token without exp is refused', async () => {
    const token = await new SignJWT({ roles: ['operator'] })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('alice')
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setIssuedAt()
      .sign(secret)
    await refused(token, 'missing_claim', /"exp"/)
  })

  test('a token without sub is refused', async () => {
    const token = await new SignJWT({ roles: ['operator'] })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setExpirationTime('10m')
      .sign(secret)
    await refused(token, 'missing_claim', /"sub"/)
  })

  test('a bad signature is refused: other secret, or a tampered payload', async () => {
    await refused(
      await bearer({}, { secret: 'another-secret-that-is-long-enough-0123456789' }),
      'bad_signature',
      /signature/,
    )
    const [h, , s] = (await bearer({ roles: ['viewer'] })).split('.')
    const forged = Buffer.from(
      JSON.stringify({
        sub: 'alice',
        roles: ['admin'],
        teams: ['*'],
        iss: TEST_ISSUER,
        aud: TEST_AUDIENCE,
        exp: Math.floor(Date.now() / 1000) + 600,
      }),
    ).toString('base64url')
    await refused(`${h}.${forged}.${s}`, 'bad_signature', /signature/)
  })

  test('roles: viewer reads but cannot write (403); operator cannot admin; admin can; no role reads nothing', async () => {
    const viewer = await bearer({ sub: 'vic', roles: ['viewer'] })
    assert.equal((await call(`${gw.url}/t/read`, { headers: auth(viewer) })).status, 200)
    const writesBefore = gw.reached.get('write') ?? 0
    const forbiddenBefore = await failures(gw.app, 'forbidden')
    const w = await call(`${gw.url}/t/write`, { method: 'POST', headers: auth(viewer) })
    assert.equal(w.status, 403)
    assert.equal(w.body.error, 'forbidden')
    assert.match(String(w.body.message), /operator role/)
    assert.equal(gw.reached.get('write') ?? 0, writesBefore, 'a refused write never reaches the handler')

    const op = await bearer({ sub: 'olga', roles: ['operator'] })
    assert.equal((await call(`${gw.url}/t/admin`, { method: 'POST', headers: auth(op) })).status, 403)
    const admin = await bearer({ sub: 'ada', roles: ['admin'] })
    assert.equal((await call(`${gw.url}/t/admin`, { method: 'POST', headers: auth(admin) })).status, 200)
    const nobody = await bearer({ sub: 'nemo', roles: ['offline_access'] })
    assert.equal((await call(`${gw.url}/t/read`, { headers: auth(nobody) })).status, 403)
    assert.equal((await call(`${gw.url}/auth/me`, { headers: auth(nobody) })).body.sub, 'nemo')
    assert.equal(await failures(gw.app, 'forbidden'), forbiddenBefore + 3)
  })

  test('dotted claim paths: Keycloak realm_access.roles and a URL-like teams claim with dots', async (t) => {
    const kc = await startAuthGateway(t, {
      GATEWAY_ROLES_CLAIM: 'realm_access.roles',
      GATEWAY_TEAMS_CLAIM: 'https://kasm.example/teams',
    })
    const token = await bearer({
      roles: ['viewer'], // the default claim name must be ignored now
      teams: ['ignored'],
      realm_access: { roles: ['uma_authorization', 'admin'] },
      'https://kasm.example/teams': ['red', 'blue'],
    })
    const me = await call(`${kc.url}/auth/me`, { headers: auth(token) })
    assert.equal(me.status, 200)
    assert.deepEqual(me.body.roles, ['admin'])
    assert.deepEqual(me.body.teams, ['red', 'blue'])
    assert.equal((await call(`${kc.url}/t/admin`, { method: 'POST', headers: auth(token) })).status, 200)
  })

  test('a refusal is logged with its reason and without the credential', async (t) => {
    const stream = new PassThrough()
    let logged = ''
    stream.on('data', (chunk: Buffer) => {
      logged += chunk.toString()
    })
    const logging = await startAuthGateway(t, {}, { level: 'info', stream })
    const token = await bearer({}, { secret: 'another-secret-that-is-long-enough-0123456789' })
    const res = await call(`${logging.url}/t/read`, { headers: auth(token) })
    assert.equal(res.status, 401)
    await waitFor('the refusal logged', () => logged.includes('bad_signature'))
    assert.match(logged, /"reason":"bad_signature"/)
    for (const part of token.split('.')) assert.ok(!logged.includes(part), 'no part of the token is logged')
  })
})
