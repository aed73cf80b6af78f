import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
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
): Promise<{ code: number; stdout: string; stderr: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-runner-'))
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

test('a file with top-level hooks and no line saying it needs its own process is refused before anything runs', async (t) => {
  const { code, stdout, stderr } = await runOn(t, {
    'hooks.test.ts': `import { before, test } from 'node:test'\nbefore(() => {})\ntest('never run', () => {})\n`,
  })
  assert.equal(code, 2)
  assert.match(stderr, /hooks\.test\.ts/)
  assert.match(stderr, /test-runner: own process/)
  assert.equal(stdout, '')
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

test('a bad --jobs is refused', async (t) => {
  const { code, stderr } = await runOn(t, {}, ['--jobs', '0'])
  assert.equal(code, 2)
  assert.match(stderr, /usage: npm run test:files/)
})
