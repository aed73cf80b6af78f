import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import { dirname, join, relative, resolve } from 'node:path'
import { test } from 'node:test'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import type { OpenedRecord } from '../../src/report/types.ts'
import { TEST_ENCRYPTION_KEY } from '../cluster/cluster-harness.ts'
import { deletePrefix, REDIS_TEST_URL, uniquePrefix } from '../cluster/redis-harness.ts'
import { testEnv } from '../helpers/jwt.ts'

/** The stores' composition root (src/stores/plugin.ts): one place chooses, every feature takes from it. */

const src = resolve(import.meta.dirname, '../../src')
const cluster = join(src, 'cluster')
/** Who may import src/cluster/: the cluster itself, the composition root, and app.ts, which registers the cluster. */
const allowed = [cluster, join(src, 'stores'), join(src, 'app.ts')]

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true })
  return entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).map((e) => join(e.parentPath, e.name))
}

test('no feature imports src/cluster/: only the composition root (and app.ts registering the cluster) do', async () => {
  const offenders: string[] = []
  for (const file of await sourceFiles(src)) {
    if (allowed.some((a) => file === a || file.startsWith(`${a}/`))) continue
    const text = await readFile(file, 'utf8')
    for (const [, specifier] of text.matchAll(/\bfrom\s+'(\.[^']+)'/g)) {
      const target = resolve(dirname(file), specifier as string)
      if (target.startsWith(`${cluster}/`)) offenders.push(`${relative(src, file)} -> ${specifier}`)
    }
  }
  assert.deepEqual(offenders, [])
})

test("embedded: every store is the process's own, and the features hold the very stores the root chose", async (t) => {
  const app = await buildApp(loadConfig(testEnv()))
  t.after(() => app.close())
  await app.ready()
  const { stores } = app
  assert.equal(app.cluster, null)
  assert.equal(stores.shared, false)
  assert.equal(stores.down(), false)
  assert.equal(app.presence, stores.presence)
  assert.equal(app.audit, stores.audit)
  assert.equal(app.board, stores.board)
  assert.equal(app.teamReport.store, stores.report)
  assert.equal(app.events.bus, stores.bus)
  assert.equal(app.events.lease, stores.readerLease)
  assert.equal(app.events.storeDown, stores.down)
})

test("cluster: every store is the Redis side, the cluster's own ones shared rather than built twice", async (t) => {
  const prefix = uniquePrefix()
  t.after(() => deletePrefix(REDIS_TEST_URL, prefix))
  const app = await buildApp(
    loadConfig(
      testEnv({
        REDIS_URL: REDIS_TEST_URL,
        GATEWAY_ENCRYPTION_KEY: TEST_ENCRYPTION_KEY,
        GATEWAY_REDIS_PREFIX: prefix,
      }),
    ),
  )
  t.after(() => app.close())
  await app.ready()
  const { stores, cluster } = app
  assert.ok(cluster)
  assert.equal(stores.shared, true)
  assert.equal(stores.replicaId, cluster.replicaId)
  assert.equal(stores.down(), false)
  assert.equal(stores.bus, cluster.bus)
  assert.equal(stores.readerLease, cluster.lease)
  assert.equal(stores.streamSlots, cluster.streamSlots)
  assert.equal(stores.presence, cluster.presence)
  assert.equal(app.presence, cluster.presence)
  assert.equal(stores.sealer, cluster.vault)
  assert.equal(app.events.bus, cluster.bus)
  // What the root built lands in Redis under the replica's prefix.
  await stores.board.set('k', 'probe', '1')
  assert.equal(await cluster.redis.exists(cluster.keys.board('k')), 1)
  assert.equal(app.teamReport.store, stores.report)
  const probe: OpenedRecord = {
    kind: 'opened',
    id: 'probe',
    team: 'blue',
    kasmId: 'k',
    run: 'r',
    requestId: 'q',
    title: 'probe',
    openedAt: new Date().toISOString(),
    deadline: null,
  }
  assert.equal(await stores.report.add(probe), true)
  assert.equal(await stores.report.add(probe), false, 'claimed once, in Redis')
})
