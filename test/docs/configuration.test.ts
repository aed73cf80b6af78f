import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import {
  CONFIGURATION_MD,
  configReference,
  referenceIn,
  renderReference,
  shown,
  withReference,
} from '../../scripts/docs-config.ts'
import { configVariables, loadConfig } from '../../src/config.ts'
import { configDocs, configTopics } from '../../src/config-docs.ts'

/**
 * docs/configuration.md lists every variable of src/config.ts with its real default, as `npm run docs:config`
 * writes it from the schema and src/config-docs.ts; a variable without a description fails here by name.
 */

test('every configuration variable has a description in src/config-docs.ts, and nothing else has one', () => {
  const docs: Partial<Record<string, { topic: string; text: string }>> = configDocs
  const undescribed = configVariables.filter((name) => (docs[name]?.text.trim() ?? '') === '')
  assert.deepEqual(undescribed, [], 'describe these in src/config-docs.ts, then run npm run docs:config')
  const unknown = Object.keys(docs).filter((name) => !configVariables.includes(name))
  assert.deepEqual(unknown, [], 'described in src/config-docs.ts, but not in the schema of src/config.ts')
  for (const name of configVariables)
    assert.ok((docs[name]?.topic ?? '') in configTopics, `${name}: its topic is not one of configTopics`)
})

test('docs/configuration.md is what npm run docs:config writes from the schema', async () => {
  const doc = await readFile(CONFIGURATION_MD, 'utf8')
  assert.equal(
    referenceIn(doc),
    renderReference(configReference()),
    'docs/configuration.md is stale: run npm run docs:config',
  )
  assert.equal(withReference(doc, referenceIn(doc)), doc, 'one blank line around the reference')
  for (const name of configVariables)
    assert.match(doc, new RegExp(`^\\| \`${name}\` \\|`, 'm'), `docs/configuration.md lacks ${name}`)
})

test("the reference's defaults are the ones the gateway boots with", () => {
  // GATEWAY_DEMO=off keeps the demo from needing anything; its own default is the schema's `auto`.
  const booted = loadConfig({ GATEWAY_DEMO: 'off' }).env as Record<string, unknown>
  for (const row of configReference()) {
    const expected = row.name === 'GATEWAY_DEMO' ? 'auto' : shown(booted[row.name])
    assert.equal(row.default, expected, `default of ${row.name}`)
  }
})
