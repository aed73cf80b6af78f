import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'node:test'
import { parse } from 'yaml'
import { documentValues, generateReadme } from './chart-readme.ts'
import { chartDir } from './helm.ts'

test('the chart README is the one generated from values.yaml (run chart-readme.ts --write)', async () => {
  const committed = await readFile(join(chartDir, 'README.md'), 'utf8')
  assert.equal(committed, await generateReadme())
})

test('every leaf value of values.yaml is documented with a `# --` comment', async () => {
  const text = await readFile(join(chartDir, 'values.yaml'), 'utf8')
  const documented = new Set(documentValues(text).map((d) => d.key))
  const missing: string[] = []
  const walk = (value: unknown, path: string): void => {
    if (documented.has(path)) return
    if (
      value !== null &&
      typeof value === 'object' &&
      !Array.isArray(value) &&
      Object.keys(value).length > 0
    ) {
      for (const [k, v] of Object.entries(value)) walk(v, path === '' ? k : `${path}.${k}`)
      return
    }
    missing.push(path)
  }
  walk(parse(text), '')
  assert.deepEqual(missing, [])
})

test('the generator reads `# --` comments, including on the first key of a map', () => {
  const docs = documentValues(
    'a:\n  # -- first\n  b: 1\n  # -- second,\n  # continued\n  c: [x]\n# plain comment\nd: 2\n',
  )
  assert.deepEqual(docs, [
    { key: 'a.b', type: 'int', default: '1', description: 'first' },
    { key: 'a.c', type: 'list', default: '["x"]', description: 'second, continued' },
  ])
})
