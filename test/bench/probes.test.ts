import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'
import { waitFor } from '../helpers/wait.ts'

const run = promisify(execFile)

/** A Node child that allocates for a while (young garbage and some kept objects) with `probe` loaded. */
function child(probe: string, dir: string, ms: number): ChildProcess {
  // It says `ready` once it runs: the probe, imported first, is in place by then.
  const work = `console.log('ready'); const kept = []; const t = setInterval(() => { for (let i = 0; i < 2e4; i++) { const o = { i, s: 'x' + i }; if (i % 100 === 0) kept.push(o) } }, 5); setTimeout(() => clearInterval(t), ${ms})`
  return spawn(process.execPath, ['--import', `./bench/probes/${probe}`, '-e', work], {
    env: { ...process.env, KRG_PROBE_DIR: dir },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
}

function exited(c: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => c.once('exit', (code) => resolve(code)))
}

function ready(c: ChildProcess): Promise<void> {
  return new Promise((resolve) => c.stdout?.once('data', () => resolve()))
}

test('gc-per-second records each second’s collections and loop delay, and gc-summary prints them', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'krg-probe-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  assert.equal(await exited(child('gc-per-second.mjs', dir, 2500)), 0)
  const file = readdirSync(dir)[0] ?? ''
  assert.ok(file.endsWith('.json'), `one file: ${readdirSync(dir).join(', ')}`)
  const rows = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
    n: number
    p99: number
    total: number
  }[]
  assert.ok(rows.length >= 2, `a row a second: ${rows.length}`)
  assert.ok(
    rows.reduce((a, r) => a + r.n, 0) > 0,
    'allocating 20,000 objects every 5 ms collects young garbage',
  )
  assert.ok(rows.every((r) => Number.isFinite(r.p99) && r.total >= 0))
  const { stdout } = await run(process.execPath, ['bench/probes/gc-summary.mjs', dir])
  const lines = stdout.trim().split('\n')
  assert.match(lines[0] ?? '', new RegExp(`^second\\t${file}$`))
  assert.ok(lines.length >= 3 && /^\d+\t\d+\/\d+\.\d\/\d+\.\d p99 \d+\.\d$/.test(lines[1] ?? ''), stdout)
})

test('heap-sample writes, on SIGUSR2, what stays alive by allocation site; heap-top lists the sites', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'krg-probe-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const c = child('heap-sample.mjs', dir, 5500)
  const done = exited(c)
  t.after(() => c.kill())
  await ready(c)
  c.kill('SIGUSR2')
  const file = join(dir, `${c.pid}.heapprofile`)
  await waitFor('the heap profile', () => existsSync(file), 15_000)
  assert.equal(await done, 0)
  const { stdout } = await run(process.execPath, ['bench/probes/heap-top.mjs', file, '5'])
  const [head, ...sites] = stdout.trim().split('\n')
  assert.match(head ?? '', /^\d+ bytes alive of what was allocated while sampling$/)
  assert.ok(sites.length > 0 && sites.every((l) => /^\s*\d+ {2}\S/.test(l)), stdout)
})
