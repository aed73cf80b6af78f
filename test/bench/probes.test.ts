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
  await waitFor('the heap profile', () => existsSync(file))
  assert.equal(await done, 0)
  const { stdout } = await run(process.execPath, ['bench/probes/heap-top.mjs', file, '5'])
  const [head, ...sites] = stdout.trim().split('\n')
  assert.match(head ?? '', /^\d+ bytes alive of what was allocated while sampling$/)
  assert.ok(sites.length > 0 && sites.every((l) => /^\s*\d+ {2}\S/.test(l)), stdout)
})

test('stages times bench events on the gateway’s diagnostics channels; stages-summary prints them', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'krg-probe-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  // What the reader and a hub publish, each event written by a runtime 5 ms (read) or 8 ms (hub) earlier.
  const work = `
    const dc = require('node:diagnostics_channel')
    const at = (ago) => JSON.stringify({ level: 'info', t: performance.timeOrigin + performance.now() - ago })
    for (let i = 0; i < 200; i++) {
      dc.channel('krg:events:read').publish({ kasmId: 's', messages: [{ kind: 'event', data: at(5) }, { kind: 'closed', run: 'r' }] })
      dc.channel('krg:events:hub').publish({ kasmId: 's', deliveries: [{ message: { kind: 'event', data: at(8) } }] })
    }`
  const c = spawn(process.execPath, ['--import', './bench/probes/stages.mjs', '-e', work], {
    env: { ...process.env, KRG_PROBE_DIR: dir },
    stdio: 'inherit',
  })
  assert.equal(await exited(c), 0)
  assert.deepEqual(readdirSync(dir), [`${c.pid}-stages.json`])
  const { stdout } = await run(process.execPath, ['bench/probes/stages-summary.mjs', dir])
  const [head, ...rows] = stdout.trim().split('\n')
  assert.equal(head, 'process\tstage\tevents\tp50\tp90\tp99\tp99.9 (ms)')
  const byStage = new Map(rows.map((r) => r.split('\t')).map((r) => [r[1], r]))
  assert.deepEqual([...byStage.keys()], ['read', 'hub'], stdout)
  for (const [stage, ms] of [
    ['read', 5],
    ['hub', 8],
  ] as const) {
    const row = byStage.get(stage) ?? []
    assert.equal(row[0], String(c.pid))
    assert.equal(row[2], '200', 'every event timed, the closed marker not')
    const p50 = Number(row[3])
    assert.ok(p50 >= ms * 0.95 && p50 < ms + 2, `${stage} p50 ${p50} ms, written ${ms} ms before`)
  }
  // A window that holds none of its seconds counts nothing.
  const none = await run(process.execPath, [
    'bench/probes/stages-summary.mjs',
    dir,
    '--from',
    '0',
    '--to',
    '1000',
  ])
  assert.equal(none.stdout.trim(), head)
})
