import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { EPHEMERAL_REDIS_ARGS, freePort, killAll, until, waitForRedis } from './redis-harness.ts'

/** The Sentinel group's name in these tests. */
export const MASTER_NAME = 'krgmaster'
/** `requirepass`/`masterauth` of the data nodes (REDIS_URL carries it). */
export const DATA_PASSWORD = 'data-password-for-tests'
/** `requirepass` of the sentinels (GATEWAY_REDIS_SENTINEL_PASSWORD). */
export const SENTINEL_PASSWORD = 'sentinel-password-for-tests'

/** A master, its replica and three sentinels, as real `redis-server` processes on free ports. */
export interface SentinelGroup {
  /** Ports of the two data nodes; `dataPorts[0]` starts as the master. */
  readonly dataPorts: readonly [number, number]
  readonly sentinelPorts: readonly number[]
  /** `GATEWAY_REDIS_SENTINELS` for these sentinels. */
  readonly sentinelsVariable: string
  /** The port Sentinel names as the master now (asked of the first sentinel). */
  masterPort(): Promise<number>
  /**
   * `SENTINEL FAILOVER`: promotes the replica without waiting for the master to fail; resolves with the new
   * master's port once it is master and the old one has been made its replica.
   */
  failover(): Promise<number>
  /** An authenticated client of one data node. */
  data(port: number): Redis
  stop(): Promise<void>
}

function spawnRedis(args: string[]): ChildProcess {
  return spawn('redis-server', args, { stdio: 'ignore' })
}

/** Starts the group and waits until every sentinel monitors the master and sees its replica in sync. */
export async function startSentinelGroup(): Promise<SentinelGroup> {
  const dir = await mkdtemp(join(tmpdir(), 'krg-sentinel-'))
  const children: ChildProcess[] = []
  const clients: Redis[] = []
  const dataPorts = [await freePort(), await freePort()] as const
  // --dir: a replica writes the master's snapshot to disk when it syncs; it goes to the test's directory.
  const common = [...EPHEMERAL_REDIS_ARGS, '--dir', dir]
  const auth = ['--requirepass', DATA_PASSWORD, '--masterauth', DATA_PASSWORD]
  children.push(spawnRedis(['--port', String(dataPorts[0]), ...common, ...auth]))
  children.push(
    spawnRedis([
      '--port',
      String(dataPorts[1]),
      ...common,
      ...auth,
      '--replicaof',
      '127.0.0.1',
      String(dataPorts[0]),
    ]),
  )
  for (const port of dataPorts) await waitForRedis(port, DATA_PASSWORD)

  const sentinelPorts: number[] = []
  for (let i = 0; i < 3; i++) {
    const port = await freePort()
    sentinelPorts.push(port)
    // Sentinel rewrites its config file: each gets its own, in the test's directory.
    const conf = join(dir, `sentinel-${i}.conf`)
    await writeFile(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        'loglevel warning',
        `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${dataPorts[0]} 2`,
        `sentinel auth-pass ${MASTER_NAME} ${DATA_PASSWORD}`,
        // Only the test's SENTINEL FAILOVER moves the master. With the 2 s this was, a loaded run found the
        // registry's first write gone from the master: most likely a failover nobody asked for (a node left
        // unanswered that long), which loses what the old master took meanwhile (replication is asynchronous).
        `sentinel down-after-milliseconds ${MASTER_NAME} 120000`,
        `sentinel failover-timeout ${MASTER_NAME} 10000`,
        `requirepass ${SENTINEL_PASSWORD}`,
        `sentinel sentinel-pass ${SENTINEL_PASSWORD}`,
        '',
      ].join('\n'),
    )
    children.push(spawnRedis([conf, '--sentinel']))
  }
  for (const port of sentinelPorts) await waitForRedis(port, SENTINEL_PASSWORD)

  const sentinel = (port: number): Redis => {
    const c = new Redis(port, '127.0.0.1', { password: SENTINEL_PASSWORD, maxRetriesPerRequest: 1 })
    c.on('error', () => {})
    clients.push(c)
    return c
  }
  const sentinels = sentinelPorts.map(sentinel)
  const first = sentinels[0] as Redis
  const masterPort = async (): Promise<number> => {
    const addr = (await first.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as string[] | null
    return Number(addr?.[1])
  }
  // Every sentinel must know the replica, in sync, before a failover can promote it.
  for (const s of sentinels) {
    await until('sentinel sees the replica in sync', async () => {
      const replicas = (await s.call('SENTINEL', 'REPLICAS', MASTER_NAME)) as string[][]
      return replicas.some((fields) => {
        const f: Record<string, string> = {}
        for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string
        return f.port === String(dataPorts[1]) && f.flags === 'slave' && f['master-link-status'] === 'ok'
      })
    })
  }

  const data = (port: number): Redis => {
    const c = new Redis(port, '127.0.0.1', { password: DATA_PASSWORD, maxRetriesPerRequest: 1 })
    c.on('error', () => {})
    clients.push(c)
    return c
  }

  return {
    dataPorts,
    sentinelPorts,
    sentinelsVariable: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
    masterPort,
    async failover() {
      const before = await masterPort()
      await first.call('SENTINEL', 'FAILOVER', MASTER_NAME)
      let now = before
      await until('sentinel names the new master', async () => {
        now = await masterPort()
        return now !== before
      })
      const promoted = data(now)
      await until('the new master is a master', async () => (await promoted.role())[0] === 'master')
      const demoted = data(before)
      await until('the old master is demoted', async () => (await demoted.role())[0] === 'slave')
      return now
    },
    data,
    async stop() {
      for (const c of clients) c.disconnect()
      await killAll(children)
      await rm(dir, { recursive: true, force: true })
    },
  }
}
