import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { freePort } from '../cluster/redis-harness.ts'
import { childEnv, TS_CHILD_FLAGS } from '../helpers/server-process.ts'
import { BOOT_MS, waitFor } from '../helpers/wait.ts'
import { root } from './helm.ts'

const run = promisify(execFile)

/** A CA and a certificate it signed for 127.0.0.1, made with the system's openssl. */
async function privateCa(dir: string): Promise<{ ca: string; key: string; cert: string }> {
  const f = (name: string) => join(dir, name)
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=krg test CA',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.pem'),
  ])
  await run('openssl', [
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=127.0.0.1',
    '-keyout',
    f('server.key'),
    '-out',
    f('server.csr'),
  ])
  await writeFile(f('san.ext'), 'subjectAltName=IP:127.0.0.1\n')
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.pem'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    f('san.ext'),
    '-out',
    f('server.pem'),
  ])
  return { ca: f('ca.pem'), key: f('server.key'), cert: f('server.pem') }
}

/**
 * The chart's `extraCACerts` (and the README's recipe without the chart) rely on NODE_EXTRA_CA_CERTS: a real
 * gateway process must trust an identity provider whose certificate a private CA signed, and only with it.
 */
test('NODE_EXTRA_CA_CERTS makes the gateway trust a private CA (an https JWKS here); without it the IdP is refused', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-ca-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const pki = await privateCa(dir)
  const { publicKey, privateKey } = await generateKeyPair('ES256')
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' }
  const idp = createServer({ key: await readFile(pki.key), cert: await readFile(pki.cert) }, (req, res) => {
    res.writeHead(req.url === '/jwks' ? 200 : 404, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ keys: [jwk] }))
  })
  await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => idp.close(() => resolve())))
  const address = idp.address()
  const jwksUrl = `https://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/jwks`
  const token = await new SignJWT({ roles: ['viewer'], teams: ['*'] })
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setSubject('carol')
    .setIssuer('https://idp.internal')
    .setAudience('krg')
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(privateKey)

  /** A gateway process with `extra` in its environment; the status of GET /auth/me with the token. */
  const meWith = async (extra: Record<string, string>): Promise<{ status: number; body: string }> => {
    const port = await freePort()
    const child = spawn(process.execPath, [...TS_CHILD_FLAGS, 'src/server.ts'], {
      cwd: root,
      env: childEnv({
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        GATEWAY_DEMO: 'off',
        HOST: '127.0.0.1',
        PORT: String(port),
        GATEWAY_JWKS_URL: jwksUrl,
        GATEWAY_JWT_ISSUER: 'https://idp.internal',
        GATEWAY_JWT_AUDIENCE: 'krg',
        GATEWAY_COOKIE_SECRET: 'c'.repeat(40),
        // Load is not what this test checks: a loaded machine must not make the gateway shed (as testEnv says).
        GATEWAY_OVERLOAD_LOOP_DELAY_MS: '0',
        ...extra,
      }),
      stdio: 'ignore',
    })
    t.after(() => {
      if (child.exitCode === null) child.kill('SIGKILL')
    })
    const url = `http://127.0.0.1:${port}`
    await waitFor(
      'the gateway answers',
      async () => (await fetch(`${url}/healthz`).catch(() => null))?.ok,
      BOOT_MS,
    )
    const res = await fetch(`${url}/auth/me`, { headers: { authorization: `Bearer ${token}` } })
    const body = await res.text()
    child.kill('SIGTERM')
    return { status: res.status, body }
  }

  const trusted = await meWith({ NODE_EXTRA_CA_CERTS: pki.ca })
  assert.equal(trusted.status, 200, trusted.body)
  assert.equal((JSON.parse(trusted.body) as { sub: string }).sub, 'carol')
  const untrusted = await meWith({})
  assert.equal(untrusted.status, 503, untrusted.body)
  assert.equal((JSON.parse(untrusted.body) as { error: string }).error, 'jwks_unavailable')
})
