import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { configVariables, loadConfig, secretFileVariables } from '../../src/config.ts'

/** The default as the README should show it: the parsed value, lists comma-joined, unset as an em dash. */
function shown(value: unknown): string {
  if (value === undefined) return '—'
  if (value instanceof Map) return value.size === 0 ? '—' : [...value.keys()].join(',')
  if (Array.isArray(value)) return value.length === 0 ? '—' : value.join(',')
  return String(value)
}

test('the README documents every configuration variable with its real default, and nothing else', async () => {
  const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8')
  const rows = new Map<string, string>()
  for (const match of readme.matchAll(/^\| `([A-Z][A-Z0-9_]+)`\s*\| ([^|]+?)\s*\|/gm)) {
    rows.set(match[1] ?? '', (match[2] ?? '').trim().replace(/^`|`$/g, ''))
  }
  const defaults = loadConfig({ GATEWAY_DEMO: 'off' }).env as Record<string, unknown>
  for (const name of configVariables) {
    assert.ok(rows.has(name), `README lacks ${name}`)
    const expected = name === 'GATEWAY_DEMO' ? 'auto' : shown(defaults[name])
    assert.equal(rows.get(name), expected, `README default of ${name}`)
  }
  for (const name of rows.keys())
    assert.ok(configVariables.includes(name), `README documents unknown ${name}`)
})

test('the README lists exactly the secret variables that accept <NAME>_FILE', async () => {
  const readme = await readFile(new URL('../../README.md', import.meta.url), 'utf8')
  const paragraph = /for any of these secret variables: ([^.]+)\./.exec(readme.replace(/\n/g, ' '))?.[1]
  assert.ok(paragraph, 'README lacks the <NAME>_FILE paragraph')
  const listed = [...paragraph.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1])
  assert.deepEqual(listed.sort(), [...secretFileVariables].sort())
})
