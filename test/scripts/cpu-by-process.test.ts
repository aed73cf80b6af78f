import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'

const run = promisify(execFile)
const script = join(import.meta.dirname, '../../scripts/cpu-by-process.mjs')

async function cpuOf(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [script, ...args])
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

test('the CPU a command’s processes used, by kind, and the command’s status', async () => {
  // A node child that spends about two seconds of CPU (a fixed count of steps, whatever the machine's load)
  // and exits 3. Its argument names a Chromium test file, as a shard's command line does: still Node's CPU.
  const { code, stdout } = await cpuOf([
    '--',
    process.execPath,
    '-e',
    'const used = () => { const c = process.cpuUsage(); return c.user + c.system }; const end = used() + 2e6; while (used() < end); process.exit(3)',
    'test/pages/favicon.chromium.test.ts',
  ])
  assert.equal(code, 3)
  const row = /^\s*([\d.]+) s\s+\d+ % {2}node: other$/m.exec(stdout)
  assert.ok(row, stdout)
  // Its last half second may fall after the last reading: the script's figures are a little low, never high.
  assert.ok(Number(row[1]) >= 1.4 && Number(row[1]) <= 3, stdout)
})

test('without a command: the usage, status 2', async () => {
  const { code, stderr } = await cpuOf([])
  assert.equal(code, 2)
  assert.match(stderr, /usage: node scripts\/cpu-by-process\.mjs -- <command \.\.\.>/)
})
