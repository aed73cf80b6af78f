import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  metricCatalogue,
  OPERATIONS_MD,
  renderTable,
  tableIn,
  withTable,
} from '../../scripts/docs-metrics.ts'
import { REDIS_TEST_URL } from '../cluster/redis-harness.ts'

/**
 * docs/operations.md lists every metric the gateway registers, in every mode, as the registry says it; the
 * table is written by `npm run docs:metrics` and must not be stale.
 */

const catalogue = metricCatalogue(REDIS_TEST_URL)

/** `krg_` strings of the source that are no metric of the registry, and why. */
const NOT_METRICS: Record<string, string> = {
  krg_session: 'the cookie name (without __Host-)',
  krg_signin: 'the sign-in binding cookie name (without __Host-)',
  krg_signed_out: 'the cookie that makes the next sign-in ask for the password',
  krg_chat_link: 'the cookie of a chat account link waiting for its confirmation (without __Host-)',
  krg_http_ended_streams: 'summed into krg_http_requests_total, never registered itself',
}

test('the metrics table of docs/operations.md is what the registry holds in every mode', async () => {
  const rows = await catalogue
  const doc = await readFile(OPERATIONS_MD, 'utf8')
  const undocumented = rows.filter((r) => !new RegExp(`^\\| \`${r.name}\`\\s*\\|`, 'm').test(doc))
  assert.deepEqual(
    undocumented.map((r) => r.name),
    [],
    'registered, not documented',
  )
  assert.equal(tableIn(doc), renderTable(rows), 'the metrics table is stale: run npm run docs:metrics')
  assert.equal(withTable(doc, tableIn(doc)), doc, 'one blank line around the table')
  // The names the issue found missing, among the rest.
  for (const name of [
    'krg_sessions_on_old_key',
    'krg_sessions_resealed_total',
    'krg_sessions_unreadable',
    'krg_reseal_job_holder',
    'krg_upstream_token_echoes_total',
    'krg_requests_shed_total',
    'krg_event_oversize_skipped_total',
  ])
    assert.ok(
      rows.some((r) => r.name === name),
      name,
    )
})

test('every metric name in the source is registered by one of the modes the table is made from', async () => {
  const names = new Set((await catalogue).map((r) => r.name))
  const src = fileURLToPath(new URL('../../src/', import.meta.url))
  const unknown: string[] = []
  for (const file of await readdir(src, { recursive: true })) {
    if (!file.endsWith('.ts')) continue
    const text = await readFile(join(src, file), 'utf8')
    for (const [, name] of text.matchAll(/['"`](krg_[a-z0-9_]+)['"`]/g))
      if (name !== undefined && !names.has(name) && !(name in NOT_METRICS)) unknown.push(`${name} (${file})`)
  }
  assert.deepEqual(
    unknown,
    [],
    'registered in no mode of scripts/docs-metrics.ts: add the mode that registers it',
  )
  for (const name of Object.keys(NOT_METRICS)) assert.ok(!names.has(name), `${name} is a metric after all`)
})
