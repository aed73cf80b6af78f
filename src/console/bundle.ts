/**
 * Bundles the console's page (src/console/page, TypeScript and CSS) with esbuild into content-hashed files.
 * Build time only: `npm run build` runs this file to write dist/console/ (the image has no esbuild), and a
 * gateway running from source (`npm start`, tests) calls {@link bundleConsole} at boot, in memory.
 *
 *   tsx src/console/bundle.ts <out dir>     writes the files and manifest.json
 */
import { createHash } from 'node:crypto'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import type { BundledFile, ConsoleManifest } from './assets.ts'

const entry = fileURLToPath(new URL('./page/main.ts', import.meta.url))
/** The team report's page: an entry of its own, so the console's script does not carry it. */
const reportEntry = fileURLToPath(new URL('./page/report/main.ts', import.meta.url))
const icon = new URL('./page/icon.svg', import.meta.url)

/** The pages' scripts and stylesheets, minified, named `console-<hash>.<ext>` and `report-<hash>.<ext>`, and the icon. */
export async function bundleConsole(): Promise<{ manifest: ConsoleManifest; files: BundledFile[] }> {
  const result = await build({
    entryPoints: { console: entry, report: reportEntry },
    bundle: true,
    write: false,
    outdir: 'out',
    entryNames: '[name]-[hash]',
    format: 'esm',
    platform: 'browser',
    target: ['chrome111', 'firefox115', 'safari16.4'],
    minify: true,
    legalComments: 'eof',
    charset: 'utf8',
    logLevel: 'silent',
  })
  const files = result.outputFiles.map((f) => ({ name: basename(f.path), contents: Buffer.from(f.contents) }))
  const named = (prefix: string, ext: string): string => {
    const file = files.find((f) => f.name.startsWith(`${prefix}-`) && f.name.endsWith(ext))
    if (file === undefined) throw new Error(`the console bundle lacks ${prefix}'s ${ext} file`)
    return file.name
  }
  const svg = await readFile(icon)
  const svgName = `icon-${createHash('sha256').update(svg).digest('hex').slice(0, 8).toUpperCase()}.svg`
  files.push({ name: svgName, contents: svg })
  return {
    manifest: {
      script: named('console', '.js'),
      stylesheet: named('console', '.css'),
      icon: svgName,
      reportScript: named('report', '.js'),
      reportStylesheet: named('report', '.css'),
    },
    files,
  }
}

async function writeBundle(dir: string): Promise<void> {
  const { manifest, files } = await bundleConsole()
  await mkdir(dir, { recursive: true })
  for (const file of files) await writeFile(join(dir, file.name), file.contents)
  await writeFile(join(dir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  process.stdout.write(
    `console bundle: ${files.map((f) => `${f.name} (${f.contents.length} B)`).join(', ')}\n`,
  )
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const dir = process.argv[2]
  if (dir === undefined) {
    process.stderr.write('usage: tsx src/console/bundle.ts <out dir>\n')
    process.exit(2)
  }
  await writeBundle(dir)
}
