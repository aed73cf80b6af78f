#!/usr/bin/env node
/**
 * `npm run test:files -- [--jobs 3] [--times FILE] [--record] [--durations FILE] [--second-leg] [file ...]`: every test file (or those named), through
 * node:test and tsx, in a few long-lived processes instead of one process per file.
 *
 * Why: most of a test file's CPU went into its process, not its tests. Each file's process loaded the gateway
 * and the test helpers again and ran them cold, before V8 had compiled anything hot; a process that runs many
 * files one after another pays that once. So the files are dealt into shards, each run by one
 * `node --test --experimental-test-isolation=none` process (its files one after another, their tests one at a
 * time), `--jobs` of them at once. A file that must have a process of its own says so on a line of its own:
 *
 *   // test-runner: own process (why)
 *
 * as must every file with top-level hooks: in a shared process a top-level `before`/`after` would be the
 * shard's, run once around every file in it, and a top-level `beforeEach` would run before every test of every
 * file. Such a file without that line is refused before anything runs (hooks inside a `describe` are its own,
 * and need no process of their own). Those files run as `node --test` always
 * ran them.
 *
 * CI runs the files on two Nodes (.ci/run). A file whose subject does not depend on the Node that runs it (what a
 * page does in Chromium; the image's build, whose Node the Dockerfile names) says so, and why, on a line of its
 * own, and runs in the first leg only: `--second-leg` leaves those files out.
 *
 *   // test-runner: one leg (why)
 *
 * The shards are dealt by each file's time in a recent run (test/durations.json), so that they take about as
 * long as each other, and the longest jobs start first: the run ends when its last job does, and a long job
 * started last would hold the run up alone. A file not in that list counts as a file of median time
 * (`--durations FILE` reads another list).
 *
 * Each job's report (TAP) is printed whole when the job fails, as one line when it passes. `--times FILE`
 * writes each file's time (scripts/test-times.mjs) there, slowest first; `--record` writes them to
 * test/durations.json. Exits 1 when a test failed.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    jobs: { type: 'string', default: '3' },
    times: { type: 'string' },
    record: { type: 'boolean', default: false },
    durations: { type: 'string', default: 'test/durations.json' },
    'second-leg': { type: 'boolean', default: false },
  },
})
const jobs = Number(values.jobs)
if (!Number.isInteger(jobs) || jobs < 1) {
  console.error(
    'usage: npm run test:files -- [--jobs N >= 1] [--times FILE] [--record] [--durations FILE] [--second-leg] [file ...]',
  )
  process.exit(2)
}

/** Files per shard: enough for a process to pay for itself, few enough that shards finish close together. */
const FILES_PER_SHARD = 20
/** Seconds each file took in a recent run: only to deal the shards and order the jobs (`--record` refreshes it). */
const DURATIONS = values.durations
const OWN_PROCESS = /^\/\/ test-runner: own process\b/m
const ONE_LEG = /^\/\/ test-runner: one leg\b/m
const TOP_LEVEL_HOOK = /^(before|after|beforeEach|afterEach)\(/m

async function testFiles(dir) {
  const found = []
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) found.push(...(await testFiles(path)))
    else if (entry.name.endsWith('.test.ts')) found.push(path)
  }
  return found
}

/**
 * The recorded times: none when the file does not exist (every file then weighs the median). Anything else that is
 * not an object of seconds by file (a merge left half of it, a hand edit) is refused before anything runs: read
 * as nothing, it would deal the shards blind without saying so, and `--record` would write it over.
 */
async function readDurations(path) {
  const text = await readFile(path, 'utf8').catch((err) => {
    if (err.code === 'ENOENT') return '{}'
    refuse(`${path} cannot be read (${err.code})`)
  })
  let parsed
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    refuse(`${path} is not JSON (${err.message})`)
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    refuse(`${path} is not an object of seconds by test file`)
  for (const [file, seconds] of Object.entries(parsed))
    if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0)
      refuse(`${path}: ${file} has ${JSON.stringify(seconds)}, not a number of seconds`)
  return parsed
}

function refuse(problem) {
  console.error(
    `${problem}: fix it, or delete it and run \`npm run test:files -- --record\` to write it anew (git holds the last one).`,
  )
  process.exit(2)
}

const files = (positionals.length > 0 ? positionals : await testFiles('test')).sort()
const own = []
const shared = []
const refused = []
/** Files left to the first leg (`--second-leg`). */
const firstLegOnly = []
for (const file of files) {
  const text = await readFile(file, 'utf8')
  if (values['second-leg'] && ONE_LEG.test(text)) firstLegOnly.push(file)
  else if (OWN_PROCESS.test(text)) own.push(file)
  else if (TOP_LEVEL_HOOK.test(text)) refused.push(file)
  else shared.push(file)
}
if (refused.length > 0) {
  console.error(
    `These files have top-level hooks, which a shared process would run around every file of the shard:\n${refused.map((f) => `  ${f}`).join('\n')}\nPut the tests and their hooks in a describe (its hooks are its own), move them into the tests (t.after), or give the file the line \`// test-runner: own process (why)\`.`,
  )
  process.exit(2)
}

const durations = await readDurations(DURATIONS)
const known = Object.values(durations).sort((a, b) => a - b)
const median = known[Math.floor(known.length / 2)] ?? 1
const weight = (file) => durations[file] ?? median

/**
 * The shards: about FILES_PER_SHARD files each, but the last `jobs` of them share one shard's files among them.
 * The run ends when its last job does, and the jobs started last are the ones still running at the end: shards
 * all alike left the machine half idle while the last full ones ran (half a minute of a seven-minute run).
 */
const capacity = Math.ceil(shared.length / FILES_PER_SHARD)
const tailed = capacity > jobs && shared.length >= capacity - 1 + jobs
const capacities = tailed
  ? [...Array.from({ length: capacity - 1 }, () => 1), ...Array.from({ length: jobs }, () => 1 / jobs)]
  : Array.from({ length: Math.min(shared.length, Math.max(jobs, capacity)) }, () => 1)
const shardCount = capacities.length
const shards = capacities.map((share) => ({ files: [], weight: 0, share }))
// Each file, heaviest first, into the shard where it would end soonest for its size (longest-processing-time
// first).
for (const file of [...shared].sort((a, b) => weight(b) - weight(a))) {
  const end = (shard) => (shard.weight + weight(file)) / shard.share
  const soonest = shards.reduce((min, shard) => (end(shard) < end(min) ? shard : min))
  soonest.files.push(file)
  soonest.weight += weight(file)
}

const scratch = await mkdtemp(join(tmpdir(), 'krg-tests-'))
/**
 * Node's compile cache for the run (unless one is set): the suite starts some two hundred Node processes that
 * compile (and strip the types of) the same modules; with it, each is compiled once. Gateway children get it
 * through test/helpers/server-process.ts.
 */
const compileCache = join(scratch, 'compile-cache')
/** The longest jobs first, whether shards or files of their own: a long job started last would end the run alone. */
const queue = [
  ...shards.map((shard, i) => ({
    name: `shard ${i + 1}/${shardCount} (${shard.files.length} files)`,
    files: shard.files.sort(),
    shared: true,
    weight: shard.weight,
  })),
  ...own.map((file) => ({ name: file, files: [file], shared: false, weight: weight(file) })),
]
  .sort((a, b) => b.weight - a.weight)
  .map((job, i) => ({ ...job, times: join(scratch, `times-${i}.txt`) }))

const children = new Set()
process.once('SIGINT', () => {
  for (const child of children) child.kill('SIGINT')
  process.exit(130)
})

/** Runs one job; resolves whether all its tests passed, having printed its report or its line. */
function run(job) {
  const args = [
    '--import',
    'tsx',
    '--test',
    '--test-timeout=300000',
    ...(job.shared ? ['--experimental-test-isolation=none', '--test-force-exit'] : []),
    '--test-reporter=tap',
    '--test-reporter-destination=stdout',
    ...(values.times === undefined && !values.record
      ? []
      : ['--test-reporter=./scripts/test-times.mjs', `--test-reporter-destination=${job.times}`]),
    ...job.files,
  ]
  const started = Date.now()
  return new Promise((resolve) => {
    // Run from inside a test (its own test does), node:test would report to that test's runner instead of as TAP.
    const { NODE_TEST_CONTEXT: _, ...inherited } = process.env
    const env = { NODE_COMPILE_CACHE: compileCache, ...inherited }
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env })
    children.add(child)
    const out = []
    child.stdout.on('data', (chunk) => out.push(chunk))
    child.stderr.on('data', (chunk) => out.push(chunk))
    child.once('close', (code, signal) => {
      children.delete(child)
      const report = Buffer.concat(out).toString('utf8')
      const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(report)?.[1] ?? 0)
      const seconds = ((Date.now() - started) / 1000).toFixed(1)
      const passed = code === 0 && count('fail') === 0
      if (!passed) process.stdout.write(`${report}\n`)
      const status = signal === null ? `exit ${code}` : signal
      console.log(
        `${passed ? 'ok' : 'not ok'} ${job.name}: ${count('pass')} passed, ${count('fail')} failed, ${count('cancelled')} cancelled in ${seconds} s${passed ? '' : ` (${status})`}`,
      )
      resolve(passed)
    })
  })
}

const started = Date.now()
let failed = 0
await Promise.all(
  Array.from({ length: Math.min(jobs, queue.length) }, async () => {
    for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
      if (!(await run(job))) failed++
    }
  }),
)
console.log(
  `\n${own.length + shared.length} files (${own.length} in processes of their own, ${shared.length} in ${shardCount} shards, ${jobs} at a time${firstLegOnly.length > 0 ? `; ${firstLegOnly.length} left to the first leg` : ''}): ${failed === 0 ? 'all passed' : `${failed} job(s) failed`} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
)

if (values.times !== undefined || values.record) {
  const rows = []
  for (const name of (await readdir(scratch)).filter((n) => n.startsWith('times-')))
    for (const line of (await readFile(join(scratch, name), 'utf8')).split('\n'))
      if (/^\s*[\d.]+ s\s/.test(line)) rows.push(line)
  rows.sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a))
  if (values.times !== undefined) {
    const total = rows.reduce((sum, line) => sum + Number.parseFloat(line), 0)
    await writeFile(
      values.times,
      `${rows.length} files, ${total.toFixed(0)} s of file time in all\n${rows.join('\n')}\n`,
    )
    console.log(`per-file times: ${relative(process.cwd(), values.times)}`)
  }
  if (values.record) {
    // Merged: a run of some files keeps the others' times; a run of all of them forgets files that are gone.
    // Tests a helper file declares count as that helper's: only the test files themselves are kept.
    if (positionals.length === 0)
      for (const file of Object.keys(durations)) if (!files.includes(file)) delete durations[file]
    for (const line of rows) {
      const file = line.trim().split(/\s+/).at(-1)
      if (files.includes(file)) durations[file] = Number.parseFloat(line)
    }
    const sorted = Object.fromEntries(Object.entries(durations).sort(([a], [b]) => a.localeCompare(b)))
    await writeFile(DURATIONS, `${JSON.stringify(sorted, null, 2)}\n`)
    console.log(`recorded: ${DURATIONS}`)
  }
}
await rm(scratch, { recursive: true, force: true })
process.exit(failed === 0 ? 0 : 1)
