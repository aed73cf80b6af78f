import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { test } from 'node:test'
import { childEnv, TS_CHILD_FLAGS } from '../helpers/server-process.ts'

/**
 * Runs `src/server.ts` in a child process (as the other tests' gateway children run, see TS_CHILD_FLAGS: what is
 * checked is the server's own refusal, not the loader's) and returns its exit code and stderr.
 * `unprivileged`: without the privilege to bind ports under 1024, also as root (CI), whose bounding set
 * loses CAP_NET_BIND_SERVICE (util-linux's setpriv) while the files stay as readable as before.
 */
function boot(
  env: Record<string, string>,
  unprivileged = false,
): Promise<{ code: number | null; stderr: string }> {
  const node = [process.execPath, ...TS_CHILD_FLAGS, 'src/server.ts']
  const argv =
    unprivileged && process.getuid?.() === 0
      ? ['setpriv', '--bounding-set=-net_bind_service', '--', ...node]
      : node
  return new Promise((resolve) => {
    const child = spawn(argv[0] as string, argv.slice(1), {
      env: childEnv(env),
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

for (const [who, env, where] of [
  ['the gateway', { GATEWAY_DEMO: 'off' }, '192.0.2.1:8080'],
  ["the demo's identity provider (port 0, the quick start's boot)", {}, '192.0.2.1'],
] as const) {
  test(`the boot stops on a HOST that is no address of this machine, naming HOST: ${who}`, async () => {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): never a local address.
    const { code, stderr } = await boot({ ...env, HOST: '192.0.2.1', PORT: '8080' })
    assert.equal(code, 78, stderr)
    assert.equal(
      stderr,
      `kasm-runtime-gateway: cannot listen on ${where}: no such address on this host; set PORT or HOST\n`,
    )
  })
}

test('the boot stops on a privileged port without the privilege, naming PORT', async (t) => {
  // Ports under this one need privileges (Linux); 0 means none does, and the refusal cannot happen here.
  const unprivileged = Number(readFileSync('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8'))
  if (unprivileged === 0) {
    t.skip('every port is unprivileged on this machine (net.ipv4.ip_unprivileged_port_start = 0)')
    return
  }
  const port = unprivileged - 1
  const { code, stderr } = await boot({ HOST: '127.0.0.1', PORT: String(port) }, true)
  assert.equal(code, 78, stderr)
  assert.equal(
    stderr,
    `kasm-runtime-gateway: cannot listen on 127.0.0.1:${port}: not permitted (a port this low needs privileges); set PORT or HOST\n`,
  )
})
