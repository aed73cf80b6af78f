import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'node:test'
import semver from 'semver'
import { root } from './helm.ts'

interface LockEntry {
  version?: string
  engines?: { node?: string } | string[]
  optional?: boolean
  os?: string[]
}

const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { engines: { node: string } }
const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>
}

/**
 * Installed packages whose `engines.node` does not admit every Node version our own `engines` claims. Packages
 * for other operating systems (optional, never installed on Linux) are left out.
 */
function offenders(ours: string, packages: Record<string, LockEntry>): string[] {
  const out: string[] = []
  for (const [path, entry] of Object.entries(packages)) {
    if (path === '') continue
    if (entry.optional && entry.os && !entry.os.includes('linux')) continue
    const theirs = Array.isArray(entry.engines) ? undefined : entry.engines?.node
    if (theirs === undefined) continue
    if (!semver.subset(ours, theirs)) out.push(`${path}@${entry.version}: node ${theirs}`)
  }
  return out
}

test("package.json's engines claim is true of every installed package (and covers Node 22 and 24)", () => {
  const ours = pkg.engines.node
  assert.ok(semver.satisfies('22.12.0', ours) && semver.satisfies('24.0.0', ours), ours)
  assert.deepEqual(offenders(ours, lock.packages), [])
})

test('the check catches a dependency that needs a newer Node than ours claims', () => {
  const found = offenders(pkg.engines.node, {
    'node_modules/cookie': { version: '9.0.0', engines: { node: '>=26' } },
    'node_modules/fsevents': { version: '2.3.3', engines: { node: '>=99' }, optional: true, os: ['darwin'] },
  })
  assert.deepEqual(found, ['node_modules/cookie@9.0.0: node >=26'])
})
