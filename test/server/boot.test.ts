import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { test } from 'node:test'

/** Runs `src/server.ts` as `npm start` would (through tsx) and returns its exit code and stderr. */
function boot(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    child.on('exit', (code) => resolve({ code, stderr }))
  })
}

/**
 * What only a child process shows: the exit code and the one stderr line, for each of the two ways a boot
 * fails (the config schema; a plugin validating what it loads). Which variables are refused, and why, is
 * config.test.ts's job, in process.
 */
const cases: Array<[string, Record<string, string>, string]> = [
  ['a port that is not a number', { PORT: 'eighty' }, 'PORT'],
  [
    'a sessions file that does not exist',
    { GATEWAY_SESSIONS_FILE: '/nonexistent/sessions.json' },
    'GATEWAY_SESSIONS_FILE',
  ],
]

for (const [name, env, variable] of cases) {
  test(`the boot stops on ${name}, naming ${variable}`, async () => {
    const { code, stderr } = await boot(env)
    assert.equal(code, 78)
    assert.match(stderr, new RegExp(`^kasm-runtime-gateway: .*${variable}`))
  })
}

test('the boot stops on a port already taken, naming PORT, without a stack', async (t) => {
  const taken = createServer()
  taken.listen(0, '127.0.0.1')
  await once(taken, 'listening')
  t.after(() => taken.close())
  const { port } = taken.address() as { port: number }
  const { code, stderr } = await boot({ HOST: '127.0.0.1', PORT: String(port) })
  assert.equal(code, 78, stderr)
  assert.equal(
    stderr,
    `kasm-runtime-gateway: cannot listen on 127.0.0.1:${port}: the address is in use; set PORT or HOST\n`,
  )
})
