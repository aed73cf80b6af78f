import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
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

const cases: Array<[string, Record<string, string>, string]> = [
  ['a port that is not a number', { PORT: 'eighty' }, 'PORT'],
  ['production without secrets', { NODE_ENV: 'production' }, 'GATEWAY_COOKIE_SECRET'],
  ['Redis without an encryption key', { REDIS_URL: 'redis://127.0.0.1:6379' }, 'GATEWAY_ENCRYPTION_KEY'],
  ['a proxy list that is not addresses', { GATEWAY_TRUST_PROXY: 'banana' }, 'GATEWAY_TRUST_PROXY'],
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
