/**
 * Summarises a V8 CPU profile (`node --cpu-prof`, or the `profile` probe): the functions with the most self
 * time, self and inclusive time by package (or by file of this project), and inclusive time by function of
 * this project (`src/`, `dist/`), as shares of the busy time (idle samples left out). A callback-style hook
 * calls the next one itself, so its inclusive time holds the rest of the request's chain: read its self time.
 * V8 samples wall time: on a busy machine a syscall that wakes a peer (a socket write on loopback) often
 * loses the CPU there, so native write shares are upper bounds.
 *
 *   npx tsx bench/common/cpu-profile.ts <file.cpuprofile> [top=30]
 */
import { readFileSync } from 'node:fs'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** `node_modules/<pkg>` (scoped too), `src/<dir>/<file>`, `node:<module>`, or the frame's kind. */
function owner(url: string, name: string): string {
  if (url === '') return name.startsWith('(') ? name : '(native)'
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg) return pkg[1] as string
  const own = /\/(src|dist|bench)\/(.+?)(\.[jt]s)?$/.exec(url)
  if (own) return `${own[1]}/${own[2]}`
  return url.startsWith('node:') ? url : url.replace(/^file:\/\//, '')
}

const [file, topArg = '30'] = process.argv.slice(2)
if (file === undefined) {
  process.stderr.write('usage: cpu-profile.ts <file.cpuprofile> [top]\n')
  process.exit(2)
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const parent = new Map<number, number>()
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
const self = new Map<number, number>()
// Inclusive: a sample counts for every package or file on its stack (once each).
const inclusive = new Map<string, number>()
const ownInclusive = new Map<string, number>()
let total = 0
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0
  const leaf = (byId.get(id) as ProfileNode).callFrame.functionName
  // Shares are of the time the process worked: waiting for work is not a cost.
  if (leaf === '(idle)') return
  self.set(id, (self.get(id) ?? 0) + dt)
  total += dt
  const owners = new Set<string>()
  const own = new Set<string>()
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const { url, functionName, lineNumber } = (byId.get(at) as ProfileNode).callFrame
    const where = owner(url, functionName)
    owners.add(where)
    if (where.startsWith('src/') || where.startsWith('dist/'))
      own.add(`${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`)
  }
  for (const o of owners) inclusive.set(o, (inclusive.get(o) ?? 0) + dt)
  for (const f of own) ownInclusive.set(f, (ownInclusive.get(f) ?? 0) + dt)
})
const byFunction = new Map<string, number>()
const byOwner = new Map<string, number>()
for (const [id, us] of self) {
  const { functionName, url, lineNumber } = (byId.get(id) as ProfileNode).callFrame
  const where = owner(url, functionName)
  const fn = `${functionName || '(anonymous)'} ${where}:${lineNumber + 1}`
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + us)
  byOwner.set(where, (byOwner.get(where) ?? 0) + us)
}
const top = Number(topArg)
const show = (title: string, m: Map<string, number>): void => {
  process.stdout.write(`\n${title} (of ${(total / 1e6).toFixed(1)} s sampled busy)\n`)
  for (const [k, us] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    process.stdout.write(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}\n`)
  }
}
show('self time by function', byFunction)
show('self time by package or file', byOwner)
show('inclusive time by package or file (its callees included)', inclusive)
show("inclusive time by function of this project's code", ownInclusive)
