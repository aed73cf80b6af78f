import assert from 'node:assert/strict'
import { test } from 'node:test'
import { type AuditCase, assertAuditNames } from '../helpers/audit-records.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'

test('each audited route records under its own name, refused before the handler or not', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  const cases: AuditCase[] = [
    ['POST', '/desktop/k1/mcp/messages', ['k1', 'messages']],
    ['POST', '/desktop/k1/mcp/messages?x=1', ['k1', 'messages']],
    ['POST', '/desktop/k1/mcp/actions', ['k1', 'actions']],
    ['POST', '/desktop/k1/mcp/attachments', ['k1', 'attachments']],
    ['POST', '/desktop/k1/mcp/requests', ['k1', 'requests']],
    ['POST', '/desktop/k1/mcp/requests/q1/cancel', ['k1', 'requests/cancel']],
    ['POST', '/desktop/bad%20id/mcp/messages', [null, 'messages']],
    ['PUT', '/admin/sessions/k9', ['k9', 'admin/sessions']],
    ['POST', '/admin/sessions', [null, 'admin/sessions']],
    ['DELETE', '/admin/sessions/k..9', [null, 'admin/sessions']],
    ['DELETE', '/admin/unreadable-sessions/k9', ['k9', 'admin/unreadable-sessions']],
    ['GET', '/auth/callback', [null, 'auth/callback']],
    ['GET', '/auth/login?ticket=not-a-ticket', [null, 'auth/login']],
    ['POST', '/auth/logout', [null, 'auth/logout']],
    ['POST', '/auth/backchannel-logout', [null, 'auth/backchannel-logout']],
    ['POST', '/auth/session', [null, 'auth/session']],
    ['DELETE', '/auth/session', [null, 'auth/session']],
    // Reads are not recorded, nor is starting a sign-in, nor a GET route's HEAD twin.
    ['GET', '/desktop/k1/mcp/messages', null],
    ['OPTIONS', '/desktop/k1/mcp/messages', null],
    ['HEAD', '/admin/sessions', null],
    ['GET', '/auth/login?return_to=%2F', null],
    ['HEAD', '/auth/callback', null],
    ['POST', '/desktop/k1/mcp/messages', ['k1', 'messages']],
  ]
  await assertAuditNames(gw.url, cases)
})

test('writes refused by the body limit and the rate limit keep their route names', async (t) => {
  const gw = await startGateway({ GATEWAY_MAX_JSON_BYTES: '1024', GATEWAY_RATE_LIMIT_MAX: '2' })
  t.after(() => gw.close())
  const headers = { authorization: `Bearer ${await bearer({ sub: 'bob', roles: ['operator'] })}` }
  const records = await assertAuditNames(
    gw.url,
    [
      // Refused while parsing, before the rate limit (preHandler) counts it.
      ['POST', '/desktop/k1/mcp/messages', ['k1', 'messages'], JSON.stringify({ text: 'x'.repeat(4096) })],
      ['POST', '/desktop/k1/mcp/actions', ['k1', 'actions']],
      ['POST', '/desktop/k1/mcp/actions', ['k1', 'actions']],
      ['POST', '/desktop/k1/mcp/requests/q1/cancel', ['k1', 'requests/cancel']],
    ],
    { headers },
  )
  assert.deepEqual(
    records.map((r) => r && [r.sub, r.outcome, r.status, r.error]),
    [
      ['bob', 'refused', 413, 'payload_too_large'],
      ['bob', 'refused', 404, 'session_not_found'],
      ['bob', 'refused', 404, 'session_not_found'],
      ['bob', 'refused', 429, 'rate_limited'],
    ],
  )
})

test('a write no route serves is recorded under /desktop/ and admin/ only, as unknown', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  const cases: AuditCase[] = [
    // The session of a v1 URL is named by its prefix, whatever follows.
    ['POST', '/desktop/k1/mcp/inbox', ['k1', 'unknown']],
    ['POST', '/desktop/k1/mcp/runs/r1/messages/key', ['k1', 'unknown']],
    ['POST', '/desktop/k1/mcp/%3Cscript%3E', ['k1', 'unknown']],
    ['DELETE', '/desktop/k..1/mcp/messages', [null, 'unknown']],
    ['POST', '/desktop/', [null, 'unknown']],
    ['POST', '/admin/whatever', [null, 'admin/unknown']],
    ['POST', '/admin/audit', [null, 'admin/unknown']],
    ['PATCH', '/admin/sessions/k9', [null, 'admin/unknown']],
    ['POST', '/auth/login', null],
    ['PUT', '/auth/session', null],
    ['POST', '/desktopx/k1', null],
    ['GET', '/desktop/k1/mcp/nothing-here', null],
    ['POST', '/admin/x', [null, 'admin/unknown']],
  ]
  await assertAuditNames(gw.url, cases)
})
