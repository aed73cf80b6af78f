import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { test } from 'node:test'
import { root } from './helm.ts'

interface LockEntry {
  version?: string
  hasInstallScript?: boolean
  optional?: boolean
  os?: string[]
}

const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
  allowScripts?: Record<string, boolean>
}
const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>
}

/**
 * Locked packages with install scripts that package.json's `allowScripts` neither allows nor denies: npm 11
 * ends `npm ci` with a warning naming each (and a newcomer's quick start with it). Packages for other operating
 * systems are left out, as npm leaves them (their scripts never run here).
 */
function unreviewed(allow: Record<string, boolean>, packages: Record<string, LockEntry>): string[] {
  const out: string[] = []
  for (const [path, entry] of Object.entries(packages)) {
    if (entry.hasInstallScript !== true) continue
    if (entry.optional && entry.os && !entry.os.includes('linux')) continue
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)
    if (!(name in allow) && !(`${name}@${entry.version}` in allow)) out.push(`${name}@${entry.version}`)
  }
  return out
}

test("every locked package with an install script is reviewed in package.json's allowScripts", () => {
  // What `npm install-scripts ls` reports from an installed tree, read here from the lock file: the same on any
  // machine and any npm version (an npm before allowScripts ignores the field and runs the scripts).
  assert.deepEqual(unreviewed(pkg.allowScripts ?? {}, lock.packages), [])
  // esbuild's postinstall only checks its platform binary (an optional dependency npm installs anyway) and
  // swaps it in for the JavaScript shim: the console bundles without it, as the image's `--ignore-scripts`
  // build shows. Denied, not allowed, so it stays a reviewed decision.
  assert.equal(pkg.allowScripts?.esbuild, false)
})

test('the check catches a new dependency with an install script, and a version pin covers one', () => {
  const found = unreviewed(
    { 'sharp@0.34.0': true },
    {
      '': {},
      'node_modules/esbuild': { version: '0.28.2', hasInstallScript: true },
      'node_modules/a/node_modules/sharp': { version: '0.34.0', hasInstallScript: true },
      'node_modules/fsevents': { version: '2.3.3', hasInstallScript: true, optional: true, os: ['darwin'] },
      'node_modules/zod': { version: '3.25.76' },
    },
  )
  assert.deepEqual(found, ['esbuild@0.28.2'])
})
