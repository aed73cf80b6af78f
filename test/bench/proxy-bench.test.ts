// test-runner: one leg (it checks that the bench's harness runs every contestant end to end; the gateway's proxying it drives is checked on both legs by the route tests, and bench figures are taken on the image's Node)
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'

const run = promisify(execFile)

const contestants = [
  'direct',
  'bare Fastify proxy',
  'nginx',
  'gateway embedded bearer',
  'gateway embedded cookie',
  'gateway redis bearer',
  'gateway redis cookie',
]

// Seven servers, two of them gateways compiled by tsx on start: minutes on a busy shared machine.
test('the proxy bench runs every contestant end to end, a read and an upload, without a failed request', {
  timeout: 300_000,
}, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'krg-proxy-bench-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const out = join(dir, 'proxy.md')
  // From source (--tsx): building dist/ is the full run's job, not a smoke test's. The figures are not what is
  // checked, so each phase is as short as still sends every contestant requests: a tenth of a second, at rates
  // that fit a few requests in it. (Closed loops load the whole machine: the suite's neighbours pay for them.)
  const args = ['--import', 'tsx', 'bench/run.ts', 'proxy', '--quick', '--tsx', '--seconds', '0.1']
  const brief = ['--routes', 'inbox,attachment', '--rate', '100', '--attachment-rate', '40', '--out', out]
  await run(process.execPath, [...args, ...brief], { timeout: 280_000 }).catch(
    (err: Error & { stdout?: string }) => {
      throw new Error(`${err.message}\n${err.stdout ?? ''}`)
    },
  )
  const report = await readFile(out, 'utf8')
  for (const route of ['inbox', 'attachment']) {
    const section = report.split(`## ${route}\n`)[1]?.split('\n## ')[0] ?? ''
    for (const name of contestants) {
      const row = section.split('\n').find((line) => line.startsWith(`| ${name} |`))
      assert.ok(row, `${route}: a row for ${name}`)
      const cells = row.split('|').map((c) => c.trim())
      assert.ok(Number(cells[2]) > 0, `${route} ${name}: requests answered (${row})`)
      assert.equal(cells[12], '0', `${route} ${name}: no failed request (${row})`)
      // Redis figures exactly where Redis is used.
      assert.equal(cells[9] !== '-', name.includes('redis'), `${route} ${name}: Redis column (${row})`)
      assert.equal(cells[11] !== '-', name.includes('redis'), `${route} ${name}: round trips column (${row})`)
    }
  }
  assert.match(report, /## Targets/)
})
