/**
 * Generates the chart's README.md from README.tmpl.md and the `# --` comments of values.yaml (the helm-docs
 * convention). `node --import tsx test/deploy/chart-readme.ts --write` rewrites it; readme.test.ts fails when
 * the committed README differs from what this produces.
 */
import { execFile } from 'node:child_process'
import { readFile, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isMap, isScalar, type Pair, parseDocument, type YAMLMap } from 'yaml'
import { chartDir, root } from './helm.ts'

/** One documented value: its dotted path, type, default (as JSON) and description. */
export interface ValueDoc {
  key: string
  type: string
  default: string
  description: string
}

const MARKER = '<!-- values -->'

/** The description of a `# --` comment, or undefined when the comment has none. */
function describe(comment: string | null | undefined): string | undefined {
  if (!comment) return undefined
  const lines = comment.split('\n').map((l) => l.trim())
  const start = lines.findIndex((l) => l.startsWith('--'))
  if (start < 0) return undefined
  return lines
    .slice(start)
    .join(' ')
    .replace(/^--\s*/, '')
    .trim()
}

function typeOf(value: unknown): string {
  if (Array.isArray(value)) return 'list'
  if (value === null) return 'null'
  if (typeof value === 'object') return 'object'
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'float'
  if (typeof value === 'boolean') return 'bool'
  return 'string'
}

/**
 * Walks the values: a map whose entries carry `# --` comments is documented entry by entry; any other
 * commented value (scalars, lists, maps such as `resources`) is one row.
 */
export function documentValues(text: string): ValueDoc[] {
  const doc = parseDocument(text)
  const out: ValueDoc[] = []
  const walk = (map: YAMLMap, prefix: string): void => {
    map.items.forEach((pair: Pair, index: number) => {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key)
      const path = `${prefix}${key}`
      // The yaml parser hangs the comment of a map's first entry on the map itself.
      const comment =
        (isScalar(pair.key) ? pair.key.commentBefore : undefined) ??
        (index === 0 ? map.commentBefore : undefined)
      const value = pair.value
      if (isMap(value) && hasDocumentedEntries(value)) {
        walk(value, `${path}.`)
        return
      }
      const description = describe(comment)
      if (description === undefined) return
      const js = isScalar(value) ? value.value : (value as { toJSON(): unknown } | null)?.toJSON()
      out.push({ key: path, type: typeOf(js), default: JSON.stringify(js), description })
    })
  }
  if (isMap(doc.contents)) walk(doc.contents, '')
  return out
}

function hasDocumentedEntries(map: YAMLMap): boolean {
  return map.items.some((pair, index) => {
    const comment =
      (isScalar(pair.key) ? pair.key.commentBefore : undefined) ??
      (index === 0 ? map.commentBefore : undefined)
    return describe(comment) !== undefined || (isMap(pair.value) && hasDocumentedEntries(pair.value))
  })
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|')
}

/** The values table in Markdown. */
export function valuesTable(docs: ValueDoc[]): string {
  const rows = docs.map(
    (d) => `| \`${d.key}\` | ${d.type} | \`${cell(d.default)}\` | ${cell(d.description)} |`,
  )
  return ['| Key | Type | Default | Description |', '| --- | --- | --- | --- |', ...rows].join('\n')
}

/** The README the chart should have, from its template and values.yaml. */
export async function generateReadme(): Promise<string> {
  const template = await readFile(join(chartDir, 'README.tmpl.md'), 'utf8')
  const values = await readFile(join(chartDir, 'values.yaml'), 'utf8')
  if (!template.includes(MARKER)) throw new Error(`README.tmpl.md has no ${MARKER} marker`)
  const header =
    '<!-- Generated from README.tmpl.md and values.yaml by test/deploy/chart-readme.ts: edit those, then run\n' +
    '     node --import tsx test/deploy/chart-readme.ts --write -->\n'
  return formatMarkdown(header + template.replace(MARKER, valuesTable(documentValues(values))))
}

/** Formats as `biome check` expects (it aligns tables), so the committed README passes `npm run lint`. */
function formatMarkdown(markdown: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = execFile(
      join(root, 'node_modules/.bin/biome'),
      ['format', `--stdin-file-path=${join(chartDir, 'README.md')}`],
      { cwd: root, maxBuffer: 8 * 1024 * 1024 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`biome format failed: ${stderr}`)) : resolvePromise(stdout),
    )
    child.stdin?.end(markdown)
  })
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  const readme = await generateReadme()
  if (process.argv.includes('--write')) await writeFile(join(chartDir, 'README.md'), readme)
  else process.stdout.write(readme)
}
