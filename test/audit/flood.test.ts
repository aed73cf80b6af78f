import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Agent, request } from 'undici'
import type { AuditRecord } from '../../src/audit/types.ts'
import { sharedRedisEnv } from '../cluster/cluster-harness.ts'
import { bearer } from '../helpers/jwt.ts'
import { startProxy } from '../upstream/support.ts'

/**
 * Refused and anonymous requests cannot erase the audit trail: they are kept apart from the records of
 * authenticated actions (each kind its own bound), and a refused request is never filed under a team its caller
 * does not belong to. The flood comes through real HTTP from many addresses (behind a trusted proxy, as a
 * botnet would), so the per-address limit of anonymous requests (test/http/anonymous-limit.test.ts) does not
 * stop it: what holds here holds without that limit.
 */

const FLOOD = 1500
const REAL = 40

for (const mode of ['memory', 'redis'] as const) {
  test(`${mode}: a flood of anonymous writes leaves every earlier authenticated record, and no team sees it`, async (t) => {
    const env = {
      ...(mode === 'redis' ? sharedRedisEnv(t) : {}),
      GATEWAY_AUDIT_RECORDS: '300',
      GATEWAY_AUDIT_REFUSED_RECORDS: '200',
      GATEWAY_TRUST_PROXY: 'loopback',
      LOG_LEVEL: 'warn',
    }
    const { gw, auth } = await startProxy(t, env)
    const agent = new Agent({ connections: 32 })
    t.after(() => agent.close())
    const root = `Bearer ${await bearer({ sub: 'root', roles: ['admin'], teams: ['*'] })}`
    const blueAdmin = `Bearer ${await bearer({ sub: 'bea', roles: ['admin'], teams: ['blue'] })}`
    const json = { 'content-type': 'application/json' }
    const post = async (headers: Record<string, string>, key: string) => {
      const res = await request(`${gw.url}/desktop/k1/mcp/messages`, {
        method: 'POST',
        headers: { ...json, ...headers },
        body: JSON.stringify({ run: 'r1', key, text: 'hello' }),
        dispatcher: agent,
      })
      await res.body.dump()
      return { status: res.statusCode, id: String(res.headers['x-request-id']) }
    }

    const real: string[] = []
    for (let i = 0; i < REAL; i++) {
      const res = await post({ authorization: auth.operator }, `real-${i}`)
      assert.equal(res.status, 200)
      real.push(res.id)
    }
    let next = 0
    const statuses = new Map<number, number>()
    const flooder = async () => {
      while (next < FLOOD) {
        const n = next++
        const from = `203.0.${Math.floor(n / 250)}.${(n % 250) + 1}`
        const { status } = await post({ 'x-forwarded-for': from }, `flood-${n}`)
        statuses.set(status, (statuses.get(status) ?? 0) + 1)
      }
    }
    await Promise.all(Array.from({ length: 32 }, flooder))
    assert.deepEqual([...statuses], [[401, FLOOD]], 'every anonymous write refused')
    // Someone of another team, refused with the 404 of a session they may not see: not blue's record either.
    assert.equal((await post({ authorization: auth.foreign }, 'foreign')).status, 404)

    const read = async (authorization: string, query: string) => {
      const res = await request(`${gw.url}/admin/audit${query}`, { headers: { authorization } })
      assert.equal(res.statusCode, 200)
      return ((await res.body.json()) as { records: AuditRecord[] }).records
    }
    const all = await read(root, '?limit=1000')
    const ids = new Set(all.map((r) => r.requestId))
    assert.deepEqual(
      real.filter((id) => !ids.has(id)),
      [],
      'every earlier authenticated record is still there',
    )
    const anonymous = all.filter((r) => r.sub === null)
    assert.ok(anonymous.length > 0, 'refusals are still recorded')
    assert.ok(anonymous.length < FLOOD, `refusals are bounded apart: ${anonymous.length}`)
    assert.ok(
      anonymous.every((r) => r.team === null && r.outcome === 'refused' && r.error === 'unauthenticated'),
      'an anonymous refusal takes no team',
    )
    assert.equal(all.find((r) => r.sub === 'fred')?.team, null, 'nor does a foreign caller')
    // Newest first across both kinds.
    const times = all.map((r) => Date.parse(r.at))
    assert.deepEqual(
      times,
      [...times].sort((a, b) => b - a),
    )

    const blue = await read(blueAdmin, '?limit=1000')
    assert.deepEqual(
      blue.map((r) => r.sub),
      real.map(() => 'olga'),
      "blue's view: exactly its operator's writes",
    )
    assert.deepEqual(new Set(blue.map((r) => r.requestId)), new Set(real))
    assert.equal((await read(root, '?sub=olga&limit=1000')).length, REAL)
  })
}
