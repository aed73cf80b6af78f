import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { dirname, join, resolve } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import semver from 'semver'
import ts from 'typescript'

/**
 * The sources run on plain `node` where Node strips types by default (Node 22.18 and later, both CI legs): no tsx.
 * Type stripping refuses what is not erasable (parameter properties, enums, namespaces), so every tsconfig
 * keeps `erasableSyntaxOnly` on and `tsc` refuses such syntax before a Node process ever meets it.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
/** Node versions that strip types without a flag. */
const STRIPS_BY_DEFAULT = '^22.18.0 || >=23.6.0'

test('every tsconfig allows only the syntax type stripping can erase', () => {
  for (const file of ['tsconfig.json', 'tsconfig.build.json', 'src/console/page/tsconfig.json']) {
    const path = join(root, file)
    const { config, error } = ts.readConfigFile(path, ts.sys.readFile)
    assert.equal(error, undefined, file)
    const { options } = ts.parseJsonConfigFileContent(config, ts.sys, dirname(path), undefined, path)
    assert.equal(options.erasableSyntaxOnly, true, file)
  }
})

test('plain node runs src/server.ts (the demo) and answers /healthz, where Node strips types', async (t) => {
  const strips = Boolean(process.features.typescript)
  if (!strips) {
    // Node 22.12 to 22.17 strip only with a flag: nothing to run here, both legs of .ci/run show the boot. A
    // Node that should strip but does not (type stripping turned off) would leave that unshown, so it fails here.
    assert.ok(
      !semver.satisfies(process.versions.node, STRIPS_BY_DEFAULT),
      `Node ${process.versions.node} strips types by default, but process.features.typescript is off`,
    )
    return
  }
  // No NODE_OPTIONS and no --import: nothing but Node's own type stripping.
  const child = spawn(process.execPath, ['src/server.ts'], {
    cwd: root,
    // Load is not what this test checks: a loaded machine must not make the gateway shed (as testEnv says).
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', GATEWAY_OVERLOAD_LOOP_DELAY_MS: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let output = ''
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString()
  })
  const url = await new Promise<string>((resolveUrl, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString()
      const listening = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output)
      if (listening?.[1]) resolveUrl(listening[1])
    })
    void exited.then((code) => reject(new Error(`exited with ${code} before listening:\n${output}`)))
  })
  const res = await fetch(`${url}/healthz`)
  assert.equal(res.status, 200, output)
  assert.deepEqual(await res.json(), { status: 'ok' })
  child.kill('SIGTERM')
  assert.equal(await exited, 0, output)
})
