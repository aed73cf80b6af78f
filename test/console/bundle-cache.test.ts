import assert from 'node:assert/strict'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { bundleConsole, cachedConsoleBundle } from '../../src/console/bundle.ts'

const page = fileURLToPath(new URL('../../src/console/page/', import.meta.url))

async function scratch(t: { after(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-bundle-cache-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  return dir
}

const kept = async (dir: string) => (await readdir(dir)).filter((name) => /^[0-9a-f]{32}$/.test(name))

test('a boot from source keeps the bundle, and the next one reads it instead of bundling', async (t) => {
  const dir = await scratch(t)
  const first = await cachedConsoleBundle(dir)
  // What it keeps is what the build makes.
  const fresh = await bundleConsole()
  assert.deepEqual(first.manifest, fresh.manifest)
  assert.deepEqual(
    first.files.map((f) => [f.name, f.contents.toString('base64')]),
    fresh.files.map((f) => [f.name, f.contents.toString('base64')]),
  )
  // Every file esbuild read is listed, so that a change to any of them is seen.
  const inputs = JSON.parse(await readFile(join(dir, 'inputs.json'), 'utf8')) as string[]
  for (const file of ['main.ts', 'console.css', 'report/main.ts', 'icon.svg'])
    assert.ok(inputs.includes(join(page, file)), `inputs.json lists ${file}`)
  const [key] = await kept(dir)
  assert.ok(key)

  // The next boot reads the kept files: a mark written into them shows up.
  const script = join(dir, key, first.manifest.script)
  await writeFile(script, `${await readFile(script, 'utf8')}/* kept */`)
  const second = await cachedConsoleBundle(dir)
  assert.match(
    second.files.find((f) => f.name === first.manifest.script)?.contents.toString() ?? '',
    /\/\* kept \*\/$/,
  )
})

test('a change to a file the bundle was made from bundles again, and only the new bundle is kept', async (t) => {
  const dir = await scratch(t)
  const first = await cachedConsoleBundle(dir)
  const [oldKey] = await kept(dir)
  assert.ok(oldKey)
  const script = join(dir, oldKey, first.manifest.script)
  await writeFile(script, `${await readFile(script, 'utf8')}/* stale */`)
  // As if the last bundle had also read `extra`, which has changed since.
  const extra = join(dir, 'extra.ts')
  await writeFile(extra, 'export const a = 1\n')
  const inputs = JSON.parse(await readFile(join(dir, 'inputs.json'), 'utf8')) as string[]
  await writeFile(join(dir, 'inputs.json'), JSON.stringify([...inputs, extra]))

  const again = await cachedConsoleBundle(dir)
  const contents = again.files.find((f) => f.name === again.manifest.script)?.contents.toString() ?? ''
  assert.doesNotMatch(contents, /stale/, 'bundled anew, not read from the stale copy')
  assert.deepEqual(await kept(dir), [oldKey], 'the same sources as before: the same key, the copy replaced')
  assert.deepEqual(JSON.parse(await readFile(join(dir, 'inputs.json'), 'utf8')), inputs)
})

test('a cache that cannot be written still gives the bundle', async (t) => {
  const dir = await scratch(t)
  // A file where the cache's directory would be.
  const blocked = join(dir, 'not-a-directory')
  await writeFile(blocked, '')
  const bundle = await cachedConsoleBundle(blocked)
  assert.deepEqual(bundle.manifest, (await bundleConsole()).manifest)
})
