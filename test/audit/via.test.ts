import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import type { AuditRecord } from '../../src/audit/types.ts'
import { bearer } from '../helpers/jwt.ts'
import { gatewayWithRuntime } from '../helpers/runtime-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * The audit record of a reply and of a handoff's end says through what it was sent, from the request itself:
 * a bearer is `api`, the console page says `X-Krg-Client: console`, any other cookie request is the runtime's
 * bundled `sidebar`. The report's `via` comes from here.
 */
test('a reply or a finish_handoff is audited with its channel: api, console, sidebar', async (t) => {
  const { gw, runtime } = await gatewayWithRuntime(t, { runtime: { deliveryStepMs: 10 } })
  const token = await bearer({ sub: 'dan', name: 'Dan', roles: ['operator'], teams: ['blue'] })
  const signin = await request(`${gw.url}/auth/session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
  })
  await signin.body.dump()
  const cookie = String(signin.headers['set-cookie']).split(';')[0] as string
  const browser = { cookie, 'sec-fetch-site': 'same-origin' }
  const fields = [{ id: 'x', type: 'string' }]

  const send = async (path: string, headers: Record<string, string>, body: unknown) => {
    const res = await request(`${gw.url}/desktop/k1/mcp/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    })
    const text = await res.body.text()
    assert.ok(res.statusCode === 202 || res.statusCode === 200, `${path}: ${res.statusCode} ${text}`)
    return String(res.headers['x-request-id'])
  }
  const reply = (headers: Record<string, string>, key: string) => {
    const q = runtime.ask({ title: key, fields })
    return send('messages', headers, {
      run: runtime.run,
      key,
      reply_to: q.request_id,
      revision: q.revision,
      values: { x: 'a' },
    })
  }
  const byApi = await reply({ authorization: `Bearer ${token}` }, 'k-api')
  const bySidebar = await reply(browser, 'k-sidebar')
  const byConsole = await reply({ ...browser, 'x-krg-client': 'console' }, 'k-console')
  // The header says nothing for a bearer: only a cookie request can be the console page.
  const bearerClaimingConsole = await reply(
    { authorization: `Bearer ${token}`, 'x-krg-client': 'console' },
    'k-api-2',
  )
  const plain = await send('messages', browser, { run: runtime.run, key: 'k-text', text: 'hello' })
  runtime.escalate('a login only a person may do')
  const finished = await send(
    'actions',
    { ...browser, 'x-krg-client': 'Console' },
    { run: runtime.run, key: 'k-finish', action: 'finish_handoff' },
  )

  const records = await waitFor('the six records', async () => {
    const all = await gw.app.audit.recent({ limit: 50 })
    return all.length >= 6 ? all : null
  })
  const of = (id: string): AuditRecord | undefined => records.find((r) => r.requestId === id)
  assert.equal(of(byApi)?.via, 'api')
  assert.equal(of(bySidebar)?.via, 'sidebar')
  assert.equal(of(byConsole)?.via, 'console')
  assert.equal(of(bearerClaimingConsole)?.via, 'api')
  assert.equal(of(finished)?.via, 'console')
  assert.equal(of(finished)?.action, 'finish_handoff')
  // A message that answers nothing has no channel to report.
  assert.equal(of(plain)?.via, undefined)
  assert.equal(of(byConsole)?.name, 'Dan')
  assert.equal(of(byConsole)?.replyTo !== undefined, true)
})
