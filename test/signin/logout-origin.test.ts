import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { OidcClient } from '../../src/auth/oidc/client.ts'
import { oidcSettings } from '../../src/auth/oidc/settings.ts'
import { loadConfig } from '../../src/config.ts'
import { testEnv } from '../helpers/jwt.ts'
import { waitFor } from '../helpers/wait.ts'

/** An IdP's discovery document and nothing else, served over real HTTP. */
async function discoveryServer(
  t: { after(fn: () => unknown): void },
  endSession: (issuer: string) => string | undefined,
) {
  let issuer = ''
  const server = createServer((req, res) => {
    if (req.url !== '/.well-known/openid-configuration') return void res.writeHead(404).end()
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(
      JSON.stringify({
        issuer,
        authorization_endpoint: `${issuer}/auth`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        end_session_endpoint: endSession(issuer),
      }),
    )
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise((resolve) => server.close(resolve)))
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const settings = oidcSettings(
    loadConfig(
      testEnv({ GATEWAY_OIDC_ISSUER: issuer, GATEWAY_OIDC_CLIENT_ID: 'c', GATEWAY_OIDC_CLIENT_SECRET: 's' }),
    ),
  )
  assert.ok(settings)
  return { issuer, client: new OidcClient(settings) }
}

test('the sign-out redirect’s origin: the issuer’s until discovery answered, then the end-session endpoint’s', async (t) => {
  const { issuer, client } = await discoveryServer(t, () => 'https://logout.idp.example/oidc/logout')
  assert.equal(client.logoutOrigin(), new URL(issuer).origin, 'not discovered yet: never waits for it')
  await waitFor('discovery', () => client.logoutOrigin() === 'https://logout.idp.example')
})

test('an IdP without an end-session endpoint: no origin (the form goes nowhere else)', async (t) => {
  const { client } = await discoveryServer(t, () => undefined)
  client.logoutOrigin()
  await waitFor('discovery', () => client.logoutOrigin() === null)
})
