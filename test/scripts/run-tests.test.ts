import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'

const run = promisify(execFile)
const runner = join(import.meta.dirname, '../../scripts/run-tests.mjs')

/** Runs the suite's runner on `files` (written to a directory of their own); its status and output. */
async function runOn(
  t: { after(fn: () => unknown): void },
  files: Record<string, string>,
  args: string[] = [],
  dir?: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  dir ??= await mkdtemp(join(tmpdir(), 'krg-runner-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const paths = []
  for (const [name, text] of Object.entries(files)) {
    await writeFile(join(dir, name), text)
    paths.push(join(dir, name))
  }
  try {
    const { stdout, stderr } = await run(process.execPath, [runner, ...args, ...paths], {
      cwd: process.cwd(),
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

const header = "import assert from 'node:assert/strict'\nimport { test } from 'node:test'\n"

test('files share a shard’s process; a file that says so gets one of its own', async (t) => {
  const shared = (mark: number) =>
    `${header}test('mark ${mark}', () => {\n  const g = globalThis as { marks?: number[] }\n  g.marks = [...(g.marks ?? []), ${mark}]\n  assert.equal(g.marks.length, ${mark})\n})\n`
  const { code, stdout } = await runOn(
    t,
    {
      'a.test.ts': shared(1),
      'b.test.ts': shared(2),
      'own.test.ts': `// test-runner: own process (it must not see the others' marks)\n${header}test('alone', () => {\n  assert.equal((globalThis as { marks?: number[] }).marks, undefined)\n})\n`,
    },
    ['--jobs', '1'],
  )
  assert.equal(code, 0, stdout)
  assert.match(stdout, /^ok shard 1\/1 \(2 files\): 2 passed, 0 failed/m)
  assert.match(stdout, /^ok \S+own\.test\.ts: 1 passed, 0 failed/m)
  assert.match(stdout, /3 files \(1 in processes of their own, 2 in 1 shards, 1 at a time\): all passed/)
})

test('shards are dealt by the files’ recorded times, and --record writes this run’s', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-runner-'))
  const durations = join(dir, 'durations.json')
  // a is long: alone in one shard, b and c together in the other. Dealt in turn, a and c would share one.
  await writeFile(
    durations,
    JSON.stringify({
      [join(dir, 'a.test.ts')]: 100,
      [join(dir, 'b.test.ts')]: 1,
      [join(dir, 'c.test.ts')]: 1,
      'gone.test.ts': 7,
    }),
  )
  const names = (name: string, expected: string[]) =>
    `${header}test('${name}', () => {\n  const g = globalThis as { names?: string[] }\n  assert.deepEqual(g.names ?? [], ${JSON.stringify(expected)})\n  g.names = [...(g.names ?? []), '${name}']\n})\n`
  const { code, stdout } = await runOn(
    t,
    { 'a.test.ts': names('a', []), 'b.test.ts': names('b', []), 'c.test.ts': names('c', ['b']) },
    ['--jobs', '2', '--durations', durations, '--record'],
    dir,
  )
  assert.equal(code, 0, stdout)
  assert.match(stdout, /^ok shard \d\/2 \(1 files\)/m)
  assert.match(stdout, /^ok shard \d\/2 \(2 files\)/m)
  const recorded = JSON.parse(await readFile(durations, 'utf8')) as Record<string, number>
  assert.deepEqual(
    Object.keys(recorded).sort(),
    [...['a', 'b', 'c'].map((n) => join(dir, `${n}.test.ts`)), 'gone.test.ts'].sort(),
  )
  assert.ok(recorded[join(dir, 'a.test.ts')]! < 100, 'this run’s time replaced the old one')
  assert.equal(recorded['gone.test.ts'], 7, 'a file not run keeps its time')
})

test('--second-leg leaves out the files that say one leg runs them', async (t) => {
  const files = {
    'both.test.ts': `${header}test('both', () => {})\n`,
    'page.test.ts': `// test-runner: one leg (what a page does in Chromium)\n${header}test('page', () => {})\n`,
  }
  const first = await runOn(t, files, ['--jobs', '1'])
  assert.equal(first.code, 0, first.stdout)
  assert.match(first.stdout, /^ok shard 1\/1 \(2 files\): 2 passed/m)
  const second = await runOn(t, files, ['--jobs', '1', '--second-leg'])
  assert.equal(second.code, 0, second.stdout)
  assert.match(second.stdout, /^ok shard 1\/1 \(1 files\): 1 passed/m)
  assert.match(
    second.stdout,
    /1 files \(0 in processes of their own, 1 in 1 shards, 1 at a time; 1 left to the first leg\): all passed/,
  )
})

test('a file with top-level hooks and no line saying it needs its own process is refused before anything runs', async (t) => {
  const { code, stdout, stderr } = await runOn(t, {
    'hooks.test.ts': `import { before, test } from 'node:test'\nbefore(() => {})\ntest('never run', () => {})\n`,
  })
  assert.equal(code, 2)
  assert.match(stderr, /hooks\.test\.ts/)
  assert.match(stderr, /test-runner: own process/)
  assert.equal(stdout, '')
})

test('hooks inside a describe are its own: the file shares a shard, and its hooks run around its tests only', async (t) => {
  const suite = `import assert from 'node:assert/strict'\nimport { after, before, describe, test } from 'node:test'\ndescribe('suite', () => {\n  before(() => { globalThis.mark = 'set' })\n  after(() => { delete globalThis.mark })\n  test('its hook ran', () => assert.equal(globalThis.mark, 'set'))\n})\n`
  const { code, stdout } = await runOn(
    t,
    {
      'a-plain.test.ts': `${header}test('no hook of another file ran', () => assert.equal(globalThis.mark, undefined))\n`,
      'b-suite.test.ts': suite,
      'c-plain.test.ts': `${header}test('no hook of another file ran', () => assert.equal(globalThis.mark, undefined))\n`,
    },
    ['--jobs', '1'],
  )
  assert.equal(code, 0, stdout)
  assert.match(stdout, /^ok shard 1\/1 \(3 files\): 3 passed/m)
  assert.match(stdout, /3 files \(0 in processes of their own, 3 in 1 shards/)
})

test('the last shards are small: the jobs still running at the end are short ones', async (t) => {
  const files: Record<string, string> = {}
  for (let i = 0; i < 45; i++)
    files[`f${String(i).padStart(2, '0')}.test.ts`] = `${header}test('one', () => {})\n`
  // No recorded times: every file weighs the same. 45 files are three shards' worth at twenty a shard: two full
  // ones, and the third shared by the two jobs' last shards.
  const { code, stdout } = await runOn(t, files, [
    '--jobs',
    '2',
    '--durations',
    '/nonexistent/durations.json',
  ])
  assert.equal(code, 0, stdout)
  const sizes = [...stdout.matchAll(/^ok shard \d+\/4 \((\d+) files\)/gm)].map((m) => Number(m[1]))
  assert.deepEqual(
    sizes.sort((a, b) => b - a),
    [16, 15, 7, 7],
  )
})

test('a failing test: its job’s report is printed whole and the runner exits 1', async (t) => {
  const { code, stdout } = await runOn(t, {
    'fails.test.ts': `${header}test('two and two', () => {\n  assert.equal(2 + 2, 5)\n})\n`,
  })
  assert.equal(code, 1)
  assert.match(stdout, /not ok 1 - two and two/)
  assert.match(stdout, /^not ok shard 1\/1 \(1 files\): 0 passed, 1 failed/m)
  assert.match(stdout, /1 job\(s\) failed/)
})

test('a recorded-times file that is not seconds by file is refused before anything runs, naming it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-runner-'))
  const durations = join(dir, 'durations.json')
  const files = { 'never.test.ts': `${header}test('never run', () => assert.fail('ran'))\n` }
  for (const [text, problem] of [
    ['{"test/a.test.ts": 1.5,\n<<<<<<< HEAD', /durations\.json is not JSON/],
    ['[1.5, 2]', /durations\.json is not an object of seconds by test file/],
    ['{"test/a.test.ts": "1.5"}', /durations\.json: test\/a\.test\.ts has "1\.5", not a number of seconds/],
  ] as const) {
    await writeFile(durations, text)
    const { code, stdout, stderr } = await runOn(t, files, ['--durations', durations], dir)
    assert.equal(code, 2, text)
    assert.match(stderr, problem)
    assert.match(stderr, /--record/)
    assert.equal(stdout, '', 'no job ran')
    assert.equal(await readFile(durations, 'utf8'), text, 'the file is left as it was')
  }
  // One that cannot be read (here a directory) is not taken for a missing one.
  const { code, stdout, stderr } = await runOn(t, files, ['--durations', dir], dir)
  assert.equal(code, 2)
  assert.match(stderr, /cannot be read \(EISDIR\)/)
  assert.equal(stdout, '')
})

test('a bad --jobs is refused', async (t) => {
  const { code, stderr } = await runOn(t, {}, ['--jobs', '0'])
  assert.equal(code, 2)
  assert.match(stderr, /usage: npm run test:files/)
})
