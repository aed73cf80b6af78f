import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { brotliCompress, constants, gzip } from 'node:zlib'

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

/** The compressed encodings an asset is offered in, most preferred first. */
export type Compression = 'br' | 'gzip'

/** A servable asset: its bytes as they are, and its compressed representations on demand. */
export interface Asset {
  readonly type: string
  readonly identity: Encoded
  /** The entity tag of the representation in `encoding` (null: as it is), known without compressing. */
  etag(encoding: Compression | null): string
  /**
   * The representation in `encoding`: compressed at maximum quality on its first request, on the thread pool
   * (never blocking the event loop), and kept. A boot compresses nothing, and a gateway nobody loads the
   * console from never compresses at all.
   */
  compressed(encoding: Compression): Promise<Encoded>
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

const brotli = promisify(brotliCompress)
const gzipped = promisify(gzip)

function compress(contents: Buffer, encoding: Compression): Promise<Buffer> {
  return encoding === 'br'
    ? brotli(contents, {
        params: {
          [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY,
          [constants.BROTLI_PARAM_SIZE_HINT]: contents.length,
        },
      })
    : gzipped(contents, { level: 9 })
}

function prepare(file: BundledFile): Asset {
  const ext = file.name.slice(file.name.lastIndexOf('.') + 1)
  const etags = {
    identity: entityTag(file.contents),
    br: entityTag(file.contents, '-br'),
    gzip: entityTag(file.contents, '-gz'),
  }
  const made = new Map<Compression, Promise<Encoded>>()
  return {
    type: TYPES[ext] ?? 'application/octet-stream',
    identity: { body: file.contents, encoding: null, etag: etags.identity },
    etag: (encoding) => etags[encoding ?? 'identity'],
    compressed(encoding) {
      let encoded = made.get(encoding)
      if (encoded === undefined) {
        encoded = compress(file.contents, encoding).then((body) => ({
          body,
          encoding,
          etag: etags[encoding],
        }))
        // A failed compression (out of memory) is tried again by the next request, not kept.
        encoded.catch(() => made.delete(encoding))
        made.set(encoding, encoded)
      }
      return encoded
    },
  }
}

/** What src/console/bundle.ts exports (not imported here: the built gateway has no bundler). */
interface Bundler {
  cachedConsoleBundle(): Promise<{ manifest: ConsoleManifest; files: BundledFile[] }>
}

/** A bundle as `npm run build` writes it: `manifest.json` and the files it names, in `dir`. */
export async function readBundle(dir: string): Promise<{ manifest: ConsoleManifest; files: BundledFile[] }> {
  const manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as ConsoleManifest
  const files = await Promise.all(
    Object.values(manifest).map(async (name: string) => ({
      name,
      contents: await readFile(join(dir, name)),
    })),
  )
  return { manifest, files }
}

/** The one load of this process, shared by every gateway it builds; forgotten when it fails. */
let loaded: Promise<ConsoleAssets> | undefined

/**
 * The console's assets, read (or bundled) once per process: the files cannot change under a running process,
 * and every gateway a process builds (tests build many) shares them and their compressed forms. From `dist/` (production: `npm run build` wrote the bundle next to this
 * file) they are read; from source there is none beside it, so esbuild (a devDependency, present wherever the
 * sources are run) bundles the page, or the bundle of the same sources kept by an earlier boot is read
 * (bundle.ts, `cachedConsoleBundle`).
 */
export function loadConsoleAssets(): Promise<ConsoleAssets> {
  loaded ??= readConsoleAssets().catch((error: unknown) => {
    loaded = undefined
    throw error
  })
  return loaded
}

async function readConsoleAssets(): Promise<ConsoleAssets> {
  const here = fileURLToPath(new URL('./', import.meta.url))
  const written = await readBundle(here).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT' && error.path === join(here, 'manifest.json')) return null
    throw error
  })
  let bundle: { manifest: ConsoleManifest; files: BundledFile[] }
  if (written !== null) bundle = written
  else if (import.meta.url.endsWith('.ts')) {
    // Named through a variable: the built gateway never loads the bundler (it is not in dist/).
    const bundler = './bundle.ts'
    bundle = await ((await import(bundler)) as Bundler).cachedConsoleBundle()
  } else {
    throw new Error('the console bundle is missing: run `npm run build`')
  }
  return { manifest: bundle.manifest, files: new Map(bundle.files.map((f) => [f.name, prepare(f)])) }
}

/** The encoding to send for an `Accept-Encoding` header: brotli, then gzip, then none (null). */
export function negotiate(acceptEncoding: string | undefined): Compression | null {
  const accepted = new Set(
    (acceptEncoding ?? '')
      .split(',')
      .map((part) => part.trim().split(';'))
      .filter(([, q]) => q === undefined || !/^q=0(?:\.0*)?$/.test(q.trim()))
      .map(([name]) => (name ?? '').toLowerCase()),
  )
  if (accepted.has('br')) return 'br'
  if (accepted.has('gzip')) return 'gzip'
  return null
}
