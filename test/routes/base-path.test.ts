import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { assertAuditNames } from '../helpers/audit-records.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer, testEnv } from '../helpers/jwt.ts'

test('GATEWAY_BASE_PATH moves the console, auth and admin routes; v1 routes and probes stay put', async (t) => {
  const gw = await startGateway({ GATEWAY_BASE_PATH: '/gateway/' })
  t.after(() => gw.close())
  const admin = { authorization: `Bearer ${await bearer({ roles: ['admin'] })}` }
  const status = async (path: string, headers: Record<string, string> = {}) => {
    const res = await request(`${gw.url}${path}`, { headers })
    await res.body.dump()
    return res.statusCode
  }

  assert.equal(await status('/gateway/auth/me', admin), 200)
  assert.equal(await status('/gateway/admin/sessions', admin), 200)
  // The console's page is only for someone signed in.
  assert.equal(await status('/gateway/', admin), 200)
  assert.equal(await status('/gateway/sessions/k1', admin), 200)
  const page = await (await request(`${gw.url}/gateway/`, { headers: admin })).body.text()
  const script = /src="([^"]+\.js)"/.exec(page)?.[1] ?? ''
  assert.match(script, /^\/gateway\/assets\/console-\w+\.js$/)
  assert.equal(await status(script), 200)
  for (const path of ['/healthz', '/metrics']) assert.equal(await status(path), 200, path)
  // Outside the base, the gateway's own routes do not exist.
  for (const path of [
    '/auth/me',
    '/admin/sessions',
    '/sessions/k1',
    script.replace('/gateway', ''),
    '/api/overview',
  ]) {
    assert.equal(await status(path, admin), 404, path)
  }
  // The v1 routes stay where the sidebar derives them from its viewer URL.
  assert.equal(await status('/desktop/nope/mcp/inbox', admin), 404)
  const inbox = await request(`${gw.url}/desktop/nope/mcp/inbox`, { headers: admin })
  assert.equal(((await inbox.body.json()) as { error: string }).error, 'session_not_found')

  // `<base>` without its slash redirects, so the page's relative asset URLs resolve under the base.
  const bare = await request(`${gw.url}/gateway`)
  await bare.body.dump()
  assert.equal(bare.statusCode, 308)
  assert.equal(bare.headers.location, '/gateway/')
})

test('audit records admin writes under the base path and ignores the same path outside it', async (t) => {
  const gw = await startGateway({ GATEWAY_BASE_PATH: '/gateway/' })
  t.after(() => gw.close())
  await assertAuditNames(
    gw.url,
    [
      ['PUT', '/gateway/admin/sessions/k1', ['k1', 'admin/sessions']],
      ['POST', '/gateway/admin/nothing-here', [null, 'admin/unknown']],
      ['PUT', '/admin/sessions/k1', null],
      ['POST', '/admin/nothing-here', null],
      ['POST', '/gateway/desktop/k1/mcp/messages', null],
      ['POST', '/desktop/k1/mcp/messages', ['k1', 'messages']],
      ['POST', '/desktop/k1/mcp/nothing-here', ['k1', 'unknown']],
    ],
    { basePath: '/gateway/' },
  )
})

test('a bad GATEWAY_BASE_PATH stops the boot naming the variable', () => {
  for (const value of ['gateway/', '/gateway', '/a//b/', '/desktop/', '/x y/', '/metrics/']) {
    assert.throws(
      () => loadConfig(testEnv({ GATEWAY_BASE_PATH: value })),
      (err: unknown) => err instanceof ConfigError && err.message.includes('GATEWAY_BASE_PATH'),
      value,
    )
  }
  assert.equal(loadConfig(testEnv({ GATEWAY_BASE_PATH: '/a/b-c/' })).routePrefix, '/a/b-c')
  assert.equal(loadConfig(testEnv()).basePath, '/')
})
