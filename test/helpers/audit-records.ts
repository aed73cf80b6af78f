import assert from 'node:assert/strict'
import type { AuditRecord } from '../../src/audit/types.ts'
import { bearer } from './jwt.ts'
import { waitFor } from './wait.ts'

/**
 * One request of an audit check (a JSON body `{}` unless given) and what its record must say:
 * `[kasmId, route]`, or null for none.
 */
export type AuditCase = [
  method: string,
  path: string,
  expected: [string | null, string] | null,
  body?: string,
]

/**
 * Sends each case to the gateway at `url` (anonymously: refusals before the handler are recorded too) and
 * checks the records `GET <base>admin/audit` returns, matched by request id. The records of the recorded
 * cases are the sentinel: once they are all there, a record for an unrecorded case would be too. Returns each
 * case's record.
 */
export async function assertAuditNames(
  url: string,
  cases: readonly AuditCase[],
  opts: { basePath?: string; headers?: Record<string, string> } = {},
): Promise<Array<AuditRecord | undefined>> {
  const ids: string[] = []
  for (const [method, path, , body = '{}'] of cases) {
    const res = await fetch(`${url}${path}`, {
      method,
      // The request id is the first answer's, not that of where a redirect leads.
      redirect: 'manual',
      headers: { 'content-type': 'application/json', ...opts.headers },
      ...(method === 'GET' || method === 'HEAD' ? {} : { body }),
    })
    await res.arrayBuffer()
    const id = res.headers.get('x-request-id')
    assert.ok(id, `${method} ${path}: no X-Request-ID`)
    ids.push(id)
  }
  const admin = { authorization: `Bearer ${await bearer({ sub: 'auditor', roles: ['admin'] })}` }
  const recorded = ids.filter((_, i) => cases[i]?.[2] !== null)
  const records = await waitFor('the audit records of the recorded requests', async () => {
    const res = await fetch(`${url}${opts.basePath ?? '/'}admin/audit?limit=1000`, { headers: admin })
    const { records } = (await res.json()) as { records: AuditRecord[] }
    const byId = new Map(records.map((r) => [r.requestId, r]))
    return recorded.every((id) => byId.has(id)) ? byId : null
  })
  return cases.map(([method, path, expected], i) => {
    const record = records.get(ids[i] ?? '')
    assert.deepEqual(record && [record.kasmId, record.route], expected ?? undefined, `${method} ${path}`)
    if (record) assert.equal(record.method, method, `${method} ${path}`)
    return record
  })
}
