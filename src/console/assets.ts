import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { brotliCompressSync, constants, gzipSync } from 'node:zlib'

/** What the bundle holds: the file names of the page's script, stylesheet and icon, and the report page's. */
export interface ConsoleManifest {
  readonly script: string
  readonly stylesheet: string
  readonly icon: string
  readonly reportScript: string
  readonly reportStylesheet: string
}

/** One bundled file as esbuild wrote it. */
export interface BundledFile {
  readonly name: string
  readonly contents: Buffer
}

/** A representation of an asset: its bytes, encoding and entity tag. */
export interface Encoded {
  readonly body: Buffer
  /** `br`, `gzip`, or null for the bytes as they are. */
  readonly encoding: 'br' | 'gzip' | null
  readonly etag: string
}

/** A servable asset: every representation, prepared once at boot. */
export interface Asset {
  readonly type: string
  readonly identity: Encoded
  readonly br: Encoded
  readonly gzip: Encoded
}

/** The console's assets by file name, and the manifest naming the page's two. */
export interface ConsoleAssets {
  readonly manifest: ConsoleManifest
  readonly files: ReadonlyMap<string, Asset>
}

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
}

/** A strong entity tag of `bytes`, for ETag and If-None-Match. */
export function entityTag(bytes: Buffer, suffix = ''): string {
  return `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 22)}${suffix}"`
}

function prepare(file: BundledFile): Asset {
  const ext = file.name.slice(file.name.lastIndexOf('.') + 1)
  return {
    type: TYPES[ext] ?? 'application/octet-stream',
    identity: { body: file.contents, encoding: null, etag: entityTag(file.contents) },
    br: {
      body: brotliCompressSync(file.contents, {
        params: {
          [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
          [constants.BROTLI_PARAM_SIZE_HINT]: file.contents.length,
        },
      }),
      encoding: 'br',
      etag: entityTag(file.contents, '-br'),
    },
    gzip: {
      body: gzipSync(file.contents, { level: 9 }),
      encoding: 'gzip',
      etag: entityTag(file.contents, '-gz'),
    },
  }
}

/** What src/console/bundle.ts exports (not imported here: the built gateway has no bundler). */
interface Bundler {
  bundleConsole(): Promise<{ manifest: ConsoleManifest; files: BundledFile[] }>
}

/**
 * The console's assets, compressed once. From `dist/` (production: `npm run build` wrote the bundle next to
 * this file) they are read; from source there is no bundle on disk, so esbuild (a devDependency, present
 * wherever the sources are run) bundles the page now, in memory.
 */
export async function loadConsoleAssets(): Promise<ConsoleAssets> {
  const here = new URL('./', import.meta.url)
  let manifest: ConsoleManifest
  let files: BundledFile[]
  const written = await readFile(new URL('manifest.json', here), 'utf8').catch(() => null)
  if (written !== null) {
    manifest = JSON.parse(written) as ConsoleManifest
    files = await Promise.all(
      Object.values(manifest).map(async (name: string) => ({
        name,
        contents: await readFile(new URL(name, here)),
      })),
    )
  } else if (import.meta.url.endsWith('.ts')) {
    // Named through a variable: the built gateway never loads the bundler (it is not in dist/).
    const bundler = './bundle.ts'
    ;({ manifest, files } = await ((await import(bundler)) as Bundler).bundleConsole())
  } else {
    throw new Error('the console bundle is missing: run `npm run build`')
  }
  return { manifest, files: new Map(files.map((f) => [f.name, prepare(f)])) }
}

/** The representation to send for an `Accept-Encoding` header: brotli, then gzip, then none. */
export function negotiate(asset: Asset, acceptEncoding: string | undefined): Encoded {
  const accepted = new Set(
    (acceptEncoding ?? '')
      .split(',')
      .map((part) => part.trim().split(';'))
      .filter(([, q]) => q === undefined || !/^q=0(?:\.0*)?$/.test(q.trim()))
      .map(([name]) => (name ?? '').toLowerCase()),
  )
  if (accepted.has('br')) return asset.br
  if (accepted.has('gzip')) return asset.gzip
  return asset.identity
}
