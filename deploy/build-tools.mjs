// Adds to an `npm ci --omit=dev` tree exactly what `npm run build` needs: `typescript` and every `@types/*`
// devDependency for `tsc` (src/dev/demo-idp.ts is compiled with the types of `oidc-provider`, a devDependency
// the image lacks, so the demo falls back to its one-time link there), and `esbuild` with `tsx` for the
// console's bundle (src/console/bundle.ts), with their dependencies, at the versions package-lock.json pins. The image's build stage runs
// it instead of a full `npm ci`, which would also fetch the linters, browsers' drivers and test models.
//
//   node deploy/build-tools.mjs        (in the directory holding package-lock.json and node_modules/)
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const manifest = JSON.parse(readFileSync('package.json', 'utf8'))
const TOOLS = [
  'typescript',
  'esbuild',
  'tsx',
  ...Object.keys(manifest.devDependencies ?? {}).filter((n) => n.startsWith('@types/')),
]

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')).packages
/** name -> version, the tools and everything they depend on, as the lockfile has them at the top level. */
const pinned = new Map()
const visit = (name) => {
  if (pinned.has(name)) return
  const entry = lock[`node_modules/${name}`]
  if (!entry?.version) throw new Error(`package-lock.json has no node_modules/${name}`)
  pinned.set(name, entry.version)
  for (const dep of Object.keys(entry.dependencies ?? {})) visit(dep)
  // esbuild's binary is an optional dependency per platform: only this machine's.
  for (const dep of Object.keys(entry.optionalDependencies ?? {})) if (forThisMachine(dep)) visit(dep)
}
function forThisMachine(name) {
  const entry = lock[`node_modules/${name}`]
  if (!entry) return false
  const fits = (list, value) => list === undefined || list.includes(value)
  return fits(entry.os, process.platform) && fits(entry.cpu, process.arch)
}
for (const tool of TOOLS) visit(tool)

// Installed apart (a project install would pull every devDependency) and then merged in.
const prefix = mkdtempSync(join(tmpdir(), 'krg-build-tools-'))
try {
  const specs = [...pinned].map(([name, version]) => `${name}@${version}`)
  execFileSync(
    'npm',
    [
      'install',
      '--prefix',
      prefix,
      '--no-save',
      '--no-package-lock',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
      ...specs,
    ],
    { stdio: 'inherit' },
  )
  const installed = join(prefix, 'node_modules')
  for (const name of readdirSync(installed)) {
    if (name === '.package-lock.json') continue
    // Scopes and .bin hold entries of their own: merge those one by one (`.bin/tsc` is a relative link).
    const nested = name.startsWith('@') || name === '.bin'
    const names = nested ? readdirSync(join(installed, name)).map((n) => `${name}/${n}`) : [name]
    for (const full of names) {
      const to = join('node_modules', full)
      if (!existsSync(to)) cpSync(join(installed, full), to, { recursive: true, verbatimSymlinks: true })
    }
  }
  process.stdout.write(`build tools: ${specs.join(' ')}\n`)
} finally {
  rmSync(prefix, { recursive: true, force: true })
}
