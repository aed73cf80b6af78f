import assert from 'node:assert/strict'
import { readdir, readFile, stat } from 'node:fs/promises'
import { dirname, join, relative, resolve } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { anchors, relativeLinks, slug } from './markdown-links.ts'

/**
 * Every relative link of every Markdown file of the repository (README, docs/, deploy/, the chart's README,
 * bench/, SECURITY.md, CONTRIBUTING.md …) names a file that exists, and every `#anchor` a heading (GitHub's
 * slug) or an HTML id of the page it points to.
 */

const root = fileURLToPath(new URL('../../', import.meta.url))
const SKIPPED = new Set(['node_modules', '.git', 'dist', 'coverage'])

/** Every `.md` file under `dir`, outside what is not the repository's own. */
async function markdownFiles(dir: string): Promise<string[]> {
  const out: string[] = []
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (SKIPPED.has(entry.name)) continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...(await markdownFiles(path)))
    else if (entry.name.endsWith('.md')) out.push(path)
  }
  return out
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

test('GitHub slugs: punctuation dropped, spaces to dashes, code and links by their text', () => {
  assert.equal(slug('Redis faults: degraded mode'), 'redis-faults-degraded-mode')
  assert.equal(
    slug("3. Upstream addresses: where the gateway reaches each session's runtime"),
    '3-upstream-addresses-where-the-gateway-reaches-each-sessions-runtime',
  )
  assert.equal(slug('The `events` bench — 1k viewers'), 'the-events-bench--1k-viewers')
  assert.equal(slug('[cluster](cluster.md): leases_and_keys'), 'cluster-leases_and_keys')
  const doc = '# A\n\n## Results\n\n```\n## Not a heading\n```\n\n### Results\n\n## Results\n'
  assert.deepEqual([...anchors(doc)], ['a', 'results', 'results-1', 'results-2'])
})

test('links are read outside code, and absolute URLs are not checked', () => {
  const doc = [
    'See [a](a.md#x), ![pic](p.png "title") and `[not](code.md)`.',
    '```md',
    '[not](fenced.md)',
    '```',
    '[ref]: docs/b.md',
    '<img src="c.png" alt=""> [web](https://example.com) [mail](mailto:x@example.com)',
  ].join('\n')
  assert.deepEqual(
    relativeLinks(doc).map((l) => `${l.line}:${l.target}`),
    ['1:a.md#x', '1:p.png', '5:docs/b.md', '6:c.png'],
  )
})

test('every relative link and anchor of every Markdown file resolves', async () => {
  const files = await markdownFiles(root)
  assert.ok(
    files.some((f) => relative(root, f) === 'README.md'),
    'README.md is read',
  )
  const anchorsOf = new Map<string, Set<string>>()
  const anchorsIn = async (file: string): Promise<Set<string>> => {
    let found = anchorsOf.get(file)
    if (found === undefined) {
      found = anchors(await readFile(file, 'utf8'))
      anchorsOf.set(file, found)
    }
    return found
  }
  const broken: string[] = []
  for (const file of files) {
    for (const { target, line } of relativeLinks(await readFile(file, 'utf8'))) {
      const where = `${relative(root, file)}:${line}: ${target}`
      const hash = target.indexOf('#')
      const path = decodeURIComponent(hash === -1 ? target : target.slice(0, hash))
      const anchor = hash === -1 ? '' : decodeURIComponent(target.slice(hash + 1))
      const resolved =
        path === '' ? file : path.startsWith('/') ? join(root, path) : resolve(dirname(file), path)
      if (!(await exists(resolved))) {
        broken.push(`${where} (no such file)`)
        continue
      }
      if (anchor !== '' && resolved.endsWith('.md') && !(await anchorsIn(resolved)).has(anchor))
        broken.push(`${where} (no such heading)`)
    }
  }
  assert.deepEqual(broken, [], 'broken links')
})
