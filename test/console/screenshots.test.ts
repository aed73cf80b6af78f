// test-runner: one leg (it writes the docs' pictures, which are what Chromium shows)
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'

const docs = new URL('../../docs/', import.meta.url)

async function pictures(): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  for (const name of (await readdir(docs)).filter((n) => n.endsWith('.png')))
    out.set(
      name,
      createHash('sha256')
        .update(await readFile(new URL(name, docs)))
        .digest('hex'),
    )
  return out
}

test('npm run screenshots writes where it is told, and the docs’ pictures change only with --update-docs', async (t) => {
  const out = await mkdtemp(join(tmpdir(), 'krg-shots-'))
  t.after(() => rm(out, { recursive: true, force: true }))
  const before = await pictures()
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'test/console/screenshots.ts',
      '--out',
      out,
      '--widths',
      'desktop',
      '--schemes',
      'dark',
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  let said = ''
  child.stdout.on('data', (c: Buffer) => {
    said += c.toString()
  })
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  assert.equal(code, 0, said)
  const written = (await readdir(out)).sort()
  assert.ok(written.includes('overview-desktop-dark.png'), written.join(', '))
  assert.ok(written.includes('session-inbox-desktop-dark.png'))
  assert.ok(
    written.every((n) => n.endsWith('-desktop-dark.png')),
    written.join(', '),
  )
  assert.match(said, new RegExp(`screenshots in ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\n$`))
  assert.deepEqual(await pictures(), before, 'docs/ untouched without --update-docs')
})
