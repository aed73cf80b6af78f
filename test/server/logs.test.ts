import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { loggerOptions } from '../../src/logger.ts'
import { testEnv } from '../helpers/jwt.ts'
import { childEnv, TS_CHILD_FLAGS } from '../helpers/server-process.ts'
import { BOOT_MS, waitFor } from '../helpers/wait.ts'
import { captureLogs } from '../sessions/capture-logs.ts'

const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string
}
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

test('every log line has an ISO-8601 time, the service, its version, pid and host', async (t) => {
  const logs = captureLogs()
  const config = loadConfig(testEnv({ LOG_LEVEL: 'info' }))
  const options = loggerOptions(config) as Record<string, unknown>
  const app = await buildApp(config, { logger: { ...options, stream: logs.logger.stream } })
  t.after(() => app.close())
  const res = await app.inject('/healthz?token=secret')
  assert.equal(res.statusCode, 200)
  const records = logs.records()
  assert.ok(records.length >= 2, logs.text())
  for (const r of records) {
    assert.match(String(r.time), ISO, JSON.stringify(r))
    assert.equal(r.service, 'kasm-runtime-gateway')
    assert.equal(r.version, pkg.version)
    assert.equal(r.pid, process.pid)
    assert.equal(typeof r.hostname, 'string')
  }
  const incoming = records.find((r) => r.msg === 'incoming request')
  assert.equal((incoming?.req as { url?: string } | undefined)?.url, '/healthz', 'no query string in the log')
})

test('SIGTERM ends with a "shutdown complete" line, then exit 0', async (t) => {
  const child = spawn(process.execPath, [...TS_CHILD_FLAGS, 'src/server.ts'], {
    env: childEnv(
      testEnv({ LOG_LEVEL: 'info', HOST: '127.0.0.1', PORT: '0', GATEWAY_SHUTDOWN_GRACE_MS: '5000' }),
    ),
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  await waitFor('listening', () => out.includes('Server listening'), BOOT_MS)
  child.kill('SIGTERM')
  assert.equal(await exited, 0)
  const lines = out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
  // Lines are compared by their time: under load a pipe may deliver two writes of the same instant reordered.
  const last = lines.find((l) => l.msg === 'shutdown complete')
  assert.ok(last, out)
  assert.ok(
    lines.every((l) => String(l.time) <= String(last.time)),
    `nothing is logged after "shutdown complete":\n${out}`,
  )
  assert.equal(last?.signal, 'SIGTERM')
  assert.ok(typeof last?.durationMs === 'number' && last.durationMs >= 0)
  assert.match(String(last?.time), ISO)
})

test('a SIGTERM answering the "Server listening" line drains: three quick-start boots in a row', async (t) => {
  // The quick start's own boot (the demo: its identity provider and runtimes), signalled the moment it says it
  // listens. With the signal handlers installed after the listen, most such boots died by the signal.
  for (let boot = 1; boot <= 3; boot++) {
    const child = spawn(process.execPath, [...TS_CHILD_FLAGS, 'src/server.ts'], {
      env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0' },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    })
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('exit', (code, signal) => resolve([code, signal])),
    )
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => {
      if (!out.includes('Server listening') && `${out}${chunk}`.includes('Server listening'))
        child.kill('SIGTERM')
      out += chunk.toString()
    })
    assert.deepEqual(await exited, [0, null], `boot ${boot}:\n${out}`)
    // The demo's terminal has readable lines (test/dev/demo-terminal.test.ts).
    assert.match(out, /^\d\d:\d\d:\d\d INFO {2}shutdown complete /m, `boot ${boot}`)
  }
})
