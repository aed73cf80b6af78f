/**
 * Bundles the console's page (src/console/page, TypeScript and CSS) with esbuild into content-hashed files.
 * Build time: `npm run build` runs this file to write dist/console/ (the image has no esbuild). A gateway running
 * from source (`npm start`, tests) calls {@link cachedConsoleBundle} at boot.
 *
 *   tsx src/console/bundle.ts <out dir>     writes the files and manifest.json
 */
import { createHash, randomUUID } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { basename, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type BundledFile, type ConsoleManifest, readBundle } from './assets.ts'

/** The page's files, named in its manifest. */
export interface ConsoleBundle {
  manifest: ConsoleManifest
  files: BundledFile[]
}

const entry = fileURLToPath(new URL('./page/main.ts', import.meta.url))
/** The team report's page: an entry of its own, so the console's script does not carry it. */
const reportEntry = fileURLToPath(new URL('./page/report/main.ts', import.meta.url))
const icon = fileURLToPath(new URL('./page/icon.svg', import.meta.url))
/**
 * What decides the bundle besides the files esbuild reads: this file (the options), the TypeScript settings, and
 * esbuild's version (its package.json: reading it does not load esbuild).
 */
const SETTINGS = [
  fileURLToPath(import.meta.url),
  fileURLToPath(new URL('../package.json', import.meta.resolve('esbuild'))),
  fileURLToPath(new URL('./page/tsconfig.json', import.meta.url)),
  fileURLToPath(new URL('../../tsconfig.json', import.meta.url)),
]
/** Where a gateway running from source keeps the bundle of the page's current sources. */
const CACHE = fileURLToPath(
  new URL('../../node_modules/.cache/kasm-runtime-gateway/console/', import.meta.url),
)

/** The pages' scripts and stylesheets, minified, named `console-<hash>.<ext>` and `report-<hash>.<ext>`, and the icon. */
export async function bundleConsole(): Promise<ConsoleBundle> {
  return (await bundle()).bundle
}

/**
 * {@link bundleConsole}, kept on disk (`node_modules/.cache/kasm-runtime-gateway/console/`) for the next boot:
 * every gateway process started from source (a test run starts about sixty per leg, and each test process builds
 * gateways) would otherwise load esbuild and bundle the same page again, about a tenth of its boot's CPU. The
 * bundle is kept under a hash of the settings (esbuild's version included) and the contents of every file esbuild
 * read to make it (its metafile's inputs, listed in `inputs.json`): a boot hashes those files again and uses the
 * bundle only when nothing changed. A file the page starts to import is read through one that changed. A cache
 * that cannot be written only makes boots slower.
 */
export async function cachedConsoleBundle(dir: string = CACHE): Promise<ConsoleBundle> {
  const listed = await readFile(join(dir, 'inputs.json'), 'utf8')
    .then((text) => JSON.parse(text) as string[])
    .catch(() => null)
  if (Array.isArray(listed)) {
    const kept = await readBundle(join(dir, await keyOf(listed))).catch(() => null)
    if (kept !== null) return kept
  }
  const started = Date.now()
  const made = await bundle()
  await keep(dir, made, started).catch(() => undefined)
  return made.bundle
}

/** The bundle and the files esbuild read to make it (absolute paths). */
async function bundle(): Promise<{ bundle: ConsoleBundle; inputs: string[] }> {
  // Loaded here, not at the top: a boot that finds its bundle kept never loads esbuild.
  const { build } = await import('esbuild')
  const result = await build({
    entryPoints: { console: entry, report: reportEntry },
    bundle: true,
    write: false,
    metafile: true,
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
    bundle: {
      manifest: {
        script: named('console', '.js'),
        stylesheet: named('console', '.css'),
        icon: svgName,
        reportScript: named('report', '.js'),
        reportStylesheet: named('report', '.css'),
      },
      files,
    },
    inputs: [...Object.keys(result.metafile.inputs).map((path) => resolve(path)), icon],
  }
}

/** The key of a bundle made from `inputs` as they are now. */
async function keyOf(inputs: readonly string[]): Promise<string> {
  const hash = createHash('sha256')
  for (const path of [...SETTINGS, ...[...inputs].sort()]) {
    const contents = await readFile(path).catch(() => null)
    hash.update(`${path}\0${contents === null ? 'missing' : contents.toString('base64')}\0`)
  }
  return hash.digest('hex').slice(0, 32)
}

async function keep(dir: string, made: { bundle: ConsoleBundle; inputs: string[] }, started: number) {
  // A file saved while esbuild ran may differ from what it read: keep nothing rather than a bundle under the wrong key.
  const changed = await Promise.all(made.inputs.map(async (path) => (await stat(path)).mtimeMs >= started))
  if (changed.some(Boolean)) return
  const key = await keyOf(made.inputs)
  const scratch = join(dir, `.${randomUUID()}`)
  await writeBundle(scratch, made.bundle)
  // Each step is a rename, so another process reading the cache sees a whole bundle or none.
  await rename(scratch, join(dir, key)).catch(() => rm(scratch, { recursive: true, force: true }))
  const list = join(dir, `.${randomUUID()}.json`)
  await writeFile(list, JSON.stringify(made.inputs))
  await rename(list, join(dir, 'inputs.json'))
  // Only the page's latest bundle is kept.
  for (const name of await readdir(dir))
    if (/^[0-9a-f]{32}$/.test(name) && name !== key)
      await rm(join(dir, name), { recursive: true, force: true })
}

async function writeBundle(dir: string, { manifest, files }: ConsoleBundle): Promise<void> {
  await mkdir(dir, { recursive: true })
  for (const file of files) await writeFile(join(dir, file.name), file.contents)
  await writeFile(join(dir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`)
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const dir = process.argv[2]
  if (dir === undefined) {
    process.stderr.write('usage: tsx src/console/bundle.ts <out dir>\n')
    process.exit(2)
  }
  const made = await bundleConsole()
  await writeBundle(dir, made)
  process.stdout.write(
    `console bundle: ${made.files.map((f) => `${f.name} (${f.contents.length} B)`).join(', ')}\n`,
  )
}
