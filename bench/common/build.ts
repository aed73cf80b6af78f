/** `dist/` for the benches that run the gateway as production does (`node dist/server.js`). */
import { execFileSync } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../../', import.meta.url))

/** The newest modification time (ms) of a file under `dir`, 0 when there is none. */
function newestUnder(dir: string): number {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs)
  }
  return newest
}

/** True when dist/server.js is missing or older than a file of src/ or the build's own configuration. */
export function distIsStale(): boolean {
  let built: number
  try {
    built = statSync(join(root, 'dist/server.js')).mtimeMs
  } catch {
    return true
  }
  const inputs = ['package.json', 'tsconfig.json', 'tsconfig.build.json'].map(
    (f) => statSync(join(root, f)).mtimeMs,
  )
  return Math.max(newestUnder(join(root, 'src')), ...inputs) > built
}

/** Runs `npm run build` when dist/ is stale or missing (a checkout, a merge or an edit since the last build). */
export function ensureBuilt(log: (line: string) => void): void {
  if (!distIsStale()) return
  log('building dist/ (npm run build): the gateway runs as compiled JavaScript, as in production')
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] })
}
