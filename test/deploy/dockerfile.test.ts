// test-runner: one leg (it replays the image's build, and the image runs Node 24, the first leg's Node)
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { cpSync, existsSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { builtinModules } from 'node:module'
import { tmpdir } from 'node:os'
import { basename, dirname, join, relative } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { bearer } from '../helpers/jwt.ts'
import { BOOT_MS, WAIT_MS } from '../helpers/wait.ts'
import { root } from './helm.ts'

/**
 * No Docker engine here: `docker build` cannot run. What can be checked is checked: the Dockerfile's inputs
 * exist and pass .dockerignore, and its stages are replayed in directories (their RUN commands as written), so
 * the build stage really builds with production dependencies and the compiler only, and what the runtime stage
 * holds really runs its CMD, passes the health check and drains on SIGTERM.
 */

const run = promisify(execFile)

interface Instruction {
  op: string
  args: string
}

/** Dockerfile instructions, with `\` continuations joined and comments dropped. */
function instructions(text: string): Instruction[] {
  const joined = text.replace(/\\\n/g, ' ')
  return joined
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const [op = '', ...rest] = l.split(/\s+/)
      return { op: op.toUpperCase(), args: rest.join(' ') }
    })
}

/** Instructions grouped by stage name. */
function stages(all: Instruction[]): Map<string, Instruction[]> {
  const out = new Map<string, Instruction[]>()
  let current: Instruction[] | undefined
  for (const i of all) {
    if (i.op === 'FROM') {
      const name = /\bAS\s+(\S+)/i.exec(i.args)?.[1] ?? `stage${out.size}`
      current = []
      out.set(name, current)
    }
    current?.push(i)
  }
  return out
}

/** .dockerignore semantics for an allowlist file: the last matching pattern decides; `**` matches all. */
function includedByDockerignore(patterns: string[], path: string): boolean {
  let included = true
  for (const raw of patterns) {
    const negated = raw.startsWith('!')
    const pattern = negated ? raw.slice(1) : raw
    const matches = pattern === '**' || path === pattern || path.startsWith(`${pattern}/`)
    if (matches) included = negated
  }
  return included
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true })
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name))
}

const dockerfile = instructions(await readFile(join(root, 'deploy/Dockerfile'), 'utf8'))
const byStage = stages(dockerfile)
const ci = await readFile(join(root, '.ci/run'), 'utf8')
const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
}

function runs(stage: string): string[] {
  return (byStage.get(stage) ?? []).filter((i) => i.op === 'RUN').map((i) => i.args)
}

describe('deploy/Dockerfile', () => {
  test('the build stage adds only the compiler to the production dependencies, then runs `npm run build`', () => {
    // Production dependencies only in what ships; no install scripts (none is needed, tsx is not run).
    assert.deepEqual(runs('prod-deps'), [
      'npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force',
    ])
    assert.match(byStage.get('build')?.[0]?.args ?? '', /^prod-deps AS build$/)
    assert.deepEqual(runs('build'), ['node deploy/build-tools.mjs', 'npm run build'])
    assert.ok(pkg.scripts.build, 'package.json has a build script')
    // The suite itself still gets everything from CI's own install.
    assert.match(ci, /^npm ci --no-audit --no-fund$/m)
  })

  test('a Node 24 slim base, non-root, health check, SIGTERM, exec-form node, labels', () => {
    const arg = dockerfile.find((i) => i.op === 'ARG' && i.args.startsWith('NODE_IMAGE='))
    assert.equal(arg?.args, 'NODE_IMAGE=node:24-slim')
    const runtime = byStage.get('runtime') ?? []
    const last = [...byStage.keys()].at(-1)
    assert.equal(last, 'runtime', 'the runtime stage is the default target')
    const op = (name: string) => runtime.filter((i) => i.op === name).map((i) => i.args)
    assert.deepEqual(op('USER'), ['1000:1000'])
    assert.deepEqual(op('STOPSIGNAL'), ['SIGTERM'])
    assert.deepEqual(op('CMD'), ['["node", "--enable-source-maps", "dist/server.js"]'])
    assert.match(op('HEALTHCHECK')[0] ?? '', /CMD \["node", "deploy\/healthcheck\.mjs", "\/healthz"\]$/)
    assert.match(op('ENV')[0] ?? '', /NODE_ENV=production/)
    const labels = op('LABEL').join(' ')
    for (const label of ['title', 'description', 'licenses', 'version', 'revision', 'created'])
      assert.match(labels, new RegExp(`org\\.opencontainers\\.image\\.${label}=`))
    // Nothing from the build stage but dist/, nothing from prod-deps but node_modules/.
    const fromCopies = runtime.filter((i) => i.op === 'COPY' && i.args.startsWith('--from'))
    assert.deepEqual(
      fromCopies.map((i) => i.args),
      ['--from=prod-deps /app/node_modules ./node_modules', '--from=build /app/dist ./dist'],
    )
  })

  test('every file the Dockerfile copies exists and passes .dockerignore', async () => {
    const patterns = (await readFile(join(root, '.dockerignore'), 'utf8'))
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'))
    const sources = dockerfile
      .filter((i) => i.op === 'COPY' && !i.args.startsWith('--from'))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1))
    assert.ok(sources.includes('src'))
    for (const source of sources) {
      assert.ok(existsSync(join(root, source)), `${source} exists`)
      assert.ok(includedByDockerignore(patterns, source), `${source} is in the build context`)
    }
    assert.ok(!includedByDockerignore(patterns, 'node_modules'), 'node_modules stays out of the context')
    assert.ok(!includedByDockerignore(patterns, '.git'))
    assert.ok(!includedByDockerignore(patterns, 'test/deploy/dockerfile.test.ts'))
  })
})

/**
 * The Dockerfile's stages replayed in temporary directories, one per stage (each stage's WORKDIR /app is its
 * directory): `FROM <stage>` copies that stage's directory, `COPY` copies from the build context (or
 * `--from=<stage>`), `ENV` applies to later `RUN`s, and `RUN` runs in `sh` with the stage's directory as its
 * working directory and a private npm cache (the Dockerfile cleans the cache; the caller's must survive).
 * Returns each stage's directory. Copies are `cpSync`'s: Node 24 copies a tree natively, where `fs.promises.cp`
 * walks it in JavaScript, a few seconds of CPU for a `node_modules`.
 */
async function replayStages(context: string, work: string): Promise<Map<string, string>> {
  const dirs = new Map<string, string>()
  for (const [name, steps] of byStage) {
    const dir = join(work, name)
    const env: Record<string, string> = { ...(process.env as Record<string, string>) }
    env.npm_config_cache = join(work, `${name}-npm-cache`)
    for (const { op, args } of steps) {
      if (op === 'FROM') {
        const base = dirs.get(args.split(/\s+/)[0] ?? '')
        if (base) cpSync(base, dir, { recursive: true, verbatimSymlinks: true })
        else await mkdir(dir, { recursive: true })
      } else if (op === 'ENV') {
        for (const m of args.matchAll(/(\w+)=(\S+)/g)) env[m[1]!] = m[2]!
      } else if (op === 'COPY') {
        const parts = args.split(/\s+/)
        const from = parts[0]?.startsWith('--from=')
          ? dirs.get(parts.shift()!.slice('--from='.length))
          : context
        assert.ok(from, `COPY ${args}: unknown stage`)
        const dest = parts.pop()!
        for (const source of parts) {
          const src = join(from, source.replace(/^\/app\//, ''))
          const target = join(dir, dest.endsWith('/') ? join(dest, basename(source)) : dest)
          await mkdir(dirname(target), { recursive: true })
          cpSync(src, target, { recursive: true, verbatimSymlinks: true })
        }
      } else if (op === 'RUN') {
        try {
          await run('sh', ['-c', args], { cwd: dir, env, maxBuffer: 16 * 1024 * 1024 })
        } catch (err) {
          const { stdout, stderr } = err as { stdout?: string; stderr?: string }
          assert.fail(`stage ${name}: RUN ${args} failed:\n${stdout ?? ''}${stderr ?? ''}`)
        }
      }
    }
    dirs.set(name, dir)
  }
  return dirs
}

/** Top-level package names of a node_modules directory (`@scope/name` for scoped ones). */
async function packagesIn(nodeModules: string): Promise<string[]> {
  const out: string[] = []
  for (const name of await readdir(nodeModules)) {
    if (name.startsWith('.')) continue
    if (name.startsWith('@')) for (const n of await readdir(join(nodeModules, name))) out.push(`${name}/${n}`)
    else out.push(name)
  }
  return out.sort()
}

describe('the image, its stages replayed from deploy/Dockerfile', { concurrency: false }, () => {
  let work = ''
  let stageDirs = new Map<string, string>()
  /** What the runtime stage holds, where its CMD runs. */
  let image = ''
  // Two `npm ci` from the registry with empty caches and a `tsc` build: about a minute alone, and past the
  // suite's 300 s per test and hook beside another leg's suite on two cores. It fails naming itself if it hangs.
  before(
    async () => {
      work = await mkdtemp(join(tmpdir(), 'krg-image-'))
      stageDirs = await replayStages(root, work)
      image = stageDirs.get('runtime') ?? ''
    },
    { timeout: 900_000 },
  )
  after(() => rm(work, { recursive: true, force: true }))

  test('the build stage installs production dependencies and the compiler only', async () => {
    const lock = JSON.parse(await readFile(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean; devOptional?: boolean }>
    }
    const production = new Set(
      Object.entries(lock.packages)
        .filter(([path, e]) => path.startsWith('node_modules/') && !e.dev && !e.devOptional)
        .map(([path]) => path.slice('node_modules/'.length))
        .filter((name) => !name.includes('/node_modules/')),
    )
    // The compiler, type declarations and the console's bundler (esbuild, run by tsx): no linter, browser driver
    // or test tool.
    const build = await packagesIn(join(stageDirs.get('build') ?? '', 'node_modules'))
    const extra = build.filter((name) => !production.has(name))
    // @types/node itself is in the production tree: the Slack SDKs list it as a dependency of theirs.
    assert.ok(extra.includes('typescript') && build.includes('@types/node'), extra.join(' '))
    assert.deepEqual(
      extra.filter(
        (name) =>
          !['typescript', 'undici-types', 'esbuild', 'tsx', 'get-tsconfig', 'resolve-pkg-maps'].includes(
            name,
          ) &&
          !name.startsWith('@types/') &&
          !name.startsWith('@esbuild/'),
      ),
      [],
    )
    const shipped = await packagesIn(join(image, 'node_modules'))
    assert.deepEqual(
      shipped.filter((name) => !production.has(name)),
      [],
      'the runtime has no build tool',
    )
  })

  test('dist/ holds everything src/ has, with source maps, and imports production dependencies only', async () => {
    const dist = join(image, 'dist')
    assert.ok(existsSync(join(dist, 'server.js')))
    assert.ok(existsSync(join(dist, 'server.js.map')), 'source maps ship for --enable-source-maps')
    assert.ok(existsSync(join(dist, 'dev/runtime-server.js')), 'the compose runtime entry point is built')

    // The console's page is bundled (esbuild, at build time only) into hashed files named by a manifest.
    const manifest = JSON.parse(await readFile(join(dist, 'console/manifest.json'), 'utf8')) as Record<
      string,
      string
    >
    for (const name of Object.values(manifest))
      assert.ok(existsSync(join(dist, 'console', name)), `dist/console/${name}`)
    assert.ok(!existsSync(join(dist, 'console/bundle.js')), 'the bundler (esbuild) is not part of dist/')
    // Every other file of src/ reaches dist/.
    const src = join(root, 'src')
    const bundled = (rel: string) => rel.startsWith('console/page/') || rel === 'console/bundle.ts'
    for (const file of await filesUnder(src)) {
      const rel = relative(src, file)
      if (bundled(rel)) continue
      const expected = rel.endsWith('.ts') ? rel.replace(/\.ts$/, '.js') : rel
      assert.ok(existsSync(join(dist, expected)), `dist/${expected} (from src/${rel})`)
    }

    const allowed = new Set([...Object.keys(pkg.dependencies), ...builtinModules])
    // The demo's identity provider needs a dev dependency the image does not contain; only the demo, which never
    // starts in production, loads it, and only with a dynamic import (a failure there leaves the ticket link).
    const devOnly: Record<string, string[]> = { 'dev/demo-idp.js': ['oidc-provider'] }
    const problems: string[] = []
    // The console's bundle (dist/console/) is minified browser code that imports nothing; text in it can look
    // like an import to this scan.
    const browser = new Set(Object.values(manifest).map((name) => `console/${name}`))
    for (const file of (await filesUnder(dist)).filter((f) => f.endsWith('.js'))) {
      const code = await readFile(file, 'utf8')
      const rel = relative(dist, file)
      if (browser.has(rel)) continue
      if (/\bfrom\s*['"][^'"]*demo-idp\.js['"]/.test(code))
        problems.push(`${rel} imports demo-idp.js statically`)
      // `from` only after what ends an import clause (a name, `}` or `*`): never the word `'from'` in a string.
      for (const m of code.matchAll(
        /(?:(?<=[\w}*]\s*)\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"]([^'"]+)['"]/g,
      )) {
        const spec = m[1]!
        if (spec.startsWith('.') || spec.startsWith('node:')) {
          if (spec.startsWith('.') && spec.endsWith('.ts')) problems.push(`${relative(dist, file)}: ${spec}`)
          continue
        }
        if (devOnly[rel]?.includes(spec)) continue
        const name = spec.startsWith('@')
          ? spec.split('/').slice(0, 2).join('/')
          : (spec.split('/')[0] ?? spec)
        if (!allowed.has(name) || name === 'tsx') problems.push(`${relative(dist, file)} imports ${name}`)
      }
    }
    assert.deepEqual(problems, [], 'dist/ imports only production dependencies, with .js extensions')
  })

  test("a stack trace from the image's node names the TypeScript source line", async () => {
    const script =
      "import { loadConfig } from './dist/config.js'; try { loadConfig({ PORT: 'x' }) } catch (e) { console.log(e.stack) }"
    const { stdout } = await run(
      process.execPath,
      ['--enable-source-maps', '--input-type=module', '-e', script],
      {
        cwd: image,
      },
    )
    assert.match(stdout, /ConfigError: invalid configuration: PORT/)
    assert.match(stdout, /src\/config\.ts:\d+:\d+/)
  })

  test("the image's CMD serves, passes the health check, and exits 0 on SIGTERM", async (t) => {
    const env = {
      PATH: process.env.PATH ?? '',
      NODE_ENV: 'production',
      GATEWAY_DEMO: 'off',
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      GATEWAY_JWT_SECRET: 'j'.repeat(40),
      GATEWAY_COOKIE_SECRET: 'c'.repeat(40),
      GATEWAY_SHUTDOWN_GRACE_MS: '10000',
    }
    const cmd = JSON.parse(
      (byStage.get('runtime') ?? []).find((i) => i.op === 'CMD')?.args ?? '[]',
    ) as string[]
    assert.equal(cmd[0], 'node')
    const child = spawn(process.execPath, cmd.slice(1), {
      cwd: image,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    t.after(() => stop(child))
    const port = await listeningPort(child)
    const health = (path: string) => healthcheck(image, path, { ...env, PORT: String(port) })
    assert.equal(await health('/healthz'), 0)
    assert.equal(await health('/readyz'), 0)
    assert.equal(await health('/no-such-route'), 1)
    // The console is served from the bundle `npm run build` wrote (the image has no esbuild to make one).
    // (The page is only for someone signed in: a bearer signed with the image's secret will do.)
    const signedIn = { authorization: `Bearer ${await bearer({}, { secret: env.GATEWAY_JWT_SECRET })}` }
    const page = await (await fetch(`http://127.0.0.1:${port}/`, { headers: signedIn })).text()
    const script = /src="(\/assets\/console-\w+\.js)"/.exec(page)?.[1]
    assert.ok(script, 'the page names its hashed script')
    const asset = await fetch(`http://127.0.0.1:${port}${script}`, { headers: { 'accept-encoding': 'br' } })
    assert.equal(asset.status, 200)
    assert.match(asset.headers.get('cache-control') ?? '', /immutable/)
    await asset.arrayBuffer()

    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    assert.equal(await exited, 0)
    assert.equal(await health('/healthz'), 1, 'a stopped gateway fails the health check')
  })

  test('node dist/dev/runtime-server.js (the compose demo session) serves and stops on SIGTERM', async (t) => {
    const env = {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      KASM_RUNTIME_INBOX_TOKEN: 'demo-token',
    }
    const child = spawn(process.execPath, ['dist/dev/runtime-server.js'], {
      cwd: image,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    t.after(() => stop(child))
    const url = await firstMatch(child, /listening at (http:\/\/\S+)/)
    const response = await fetch(new URL('inbox', url.endsWith('/') ? url : `${url}/`), {
      headers: { 'x-kasm-runtime-session-token': 'demo-token' },
    })
    await response.body?.cancel()
    assert.equal(response.status, 200)
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    assert.equal(await exited, 0)
  })
})

/** The Dockerfile's HEALTHCHECK command, run the same way; resolves with its exit code. */
function healthcheck(cwd: string, path: string, env: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['deploy/healthcheck.mjs', path], { cwd, env, timeout: WAIT_MS }, (err) =>
      resolve(err ? (typeof err.code === 'number' ? err.code : 1) : 0),
    )
  })
}

/** Waits (generously) for a line of the child's output matching `re`; returns its first group. */
function firstMatch(child: ChildProcess, re: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = ''
    const timer = setTimeout(
      () => reject(new Error(`no ${re} within ${BOOT_MS} ms; output:\n${seen}`)),
      BOOT_MS,
    )
    timer.unref()
    const onData = (chunk: Buffer) => {
      seen += chunk.toString()
      const m = re.exec(seen)
      if (m?.[1]) {
        clearTimeout(timer)
        resolve(m[1])
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', onData)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`exited with ${code} before ${re}; output:\n${seen}`))
    })
  })
}

async function listeningPort(child: ChildProcess): Promise<number> {
  return Number(await firstMatch(child, /listening at http:\/\/127\.0\.0\.1:(\d+)/))
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGKILL')
  })
}
