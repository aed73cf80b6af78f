import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { WAIT_MS } from '../helpers/wait.ts'
import { EPHEMERAL_REDIS_ARGS, killAll, portIsFree, until, waitForRedis } from './redis-harness.ts'

const run = promisify(execFile)

/** A master of the cluster, as CLUSTER NODES names it. */
export interface ClusterMaster {
  readonly id: string
  readonly port: number
  /** `127.0.0.1:<port>`. */
  readonly addr: string
  /** The first slot of its lowest range: masters() sorts by it, so an index names a slot range. */
  readonly firstSlot: number
}

/** A Redis Cluster of real `redis-server` processes on loopback. */
export interface RedisCluster {
  /** `GATEWAY_REDIS_CLUSTER_NODES` for it: every node's `host:port`, comma-separated. */
  readonly nodes: string
  readonly ports: readonly number[]
  /** `requirepass`/`masterauth` of every node, when one was asked for (REDIS_URL carries it). */
  readonly password: string | undefined
  /** The masters now, sorted by the first slot they serve (index 0 serves slot 0). */
  masters(): Promise<ClusterMaster[]>
  /**
   * SIGKILLs the master serving the `index`-th slot range (default 0) and resolves with its replica once that
   * replica is promoted and every live node reports `cluster_state:ok` with every slot served. With `rejoin`,
   * the killed node is then started again (empty, same node id from its config file): it rejoins as the new
   * master's replica, and the promise waits until its replication link is up, so the cluster has a replica for
   * every master again (a second failover of that range is possible).
   */
  killMaster(index?: number, opts?: { rejoin?: boolean }): Promise<ClusterMaster>
  /** Process ids of the running nodes (a bench reads their CPU time). */
  pids(): number[]
  /** An authenticated plain client of one node (closed by stop()). */
  node(port: number): Redis
  /** Kills every process, closes every client and removes the temporary directory. */
  stop(): Promise<void>
}

export interface RedisClusterOptions {
  readonly masters?: number
  readonly replicasPerMaster?: number
  /** Sets `requirepass` and `masterauth` on every node. */
  readonly password?: string
  /** `cluster-node-timeout`: how long a node may be unreachable before it is failed over (ms). */
  readonly nodeTimeoutMs?: number
}

const SLOTS = 16384
/** The cluster bus listens on port + 10000: both must be free, and below 65536. */
const BUS_OFFSET = 10000

/** `count` ports whose port + 10000 is free too, none of them already taken by `taken`. */
async function clusterPorts(count: number): Promise<number[]> {
  const ports: number[] = []
  for (let attempt = 0; ports.length < count; attempt++) {
    if (attempt > 500) throw new Error('no free port pairs (port and port + 10000) for a Redis Cluster')
    // 20000-44999, above freePort's ports; the bus port is 30000-54999.
    const port = 20000 + Math.floor(Math.random() * 25000)
    if (ports.includes(port) || ports.includes(port + BUS_OFFSET) || ports.includes(port - BUS_OFFSET))
      continue
    if ((await portIsFree(port)) && (await portIsFree(port + BUS_OFFSET))) ports.push(port)
  }
  return ports
}

/** CLUSTER INFO as fields. */
function infoFields(text: string): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const line of text.split(/\r?\n/)) {
    const at = line.indexOf(':')
    if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1).trim()
  }
  return fields
}

interface NodeLine {
  readonly id: string
  readonly port: number
  readonly flags: readonly string[]
  readonly masterId: string
  readonly slots: readonly string[]
}

/** CLUSTER NODES' lines: `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`. */
function nodeLines(text: string): NodeLine[] {
  return text
    .trim()
    .split('\n')
    .filter((l) => l.length > 0)
    .map((line) => {
      const [id = '', address = '', flags = '', masterId = '', , , , , ...slots] = line.split(' ')
      const port = Number(address.split('@')[0]?.split(':')[1])
      return { id, port, flags: flags.split(','), masterId, slots }
    })
}

const firstSlotOf = (slots: readonly string[]): number =>
  Math.min(...slots.filter((s) => !s.startsWith('[')).map((s) => Number(s.split('-')[0])))

/**
 * Starts `masters` x (1 + `replicasPerMaster`) `redis-server` processes with `cluster-enabled yes` (nothing
 * persisted, each node's cluster config file in a temporary directory), creates the cluster with
 * `redis-cli --cluster create`, and waits until every node reports `cluster_state:ok` with all 16384 slots
 * served and every replica's link to its master up. Everything is stopped again when a step fails.
 */
export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisCluster> {
  const masterCount = opts.masters ?? 3
  const replicasPerMaster = opts.replicasPerMaster ?? 1
  const nodeTimeoutMs = opts.nodeTimeoutMs ?? 1000
  const password = opts.password
  const dir = await mkdtemp(join(tmpdir(), 'krg-rcluster-'))
  const children = new Map<number, ChildProcess>()
  const clients: Redis[] = []
  let ports: number[] = []

  const spawnNode = (port: number): void => {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        ...EPHEMERAL_REDIS_ARGS,
        '--dir',
        dir,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--cluster-node-timeout',
        String(nodeTimeoutMs),
        // Every node is on 127.0.0.1: announce it, so CLUSTER NODES/SLOTS hand clients that address.
        // A replica's full sync starts at once instead of after Redis 7's default 5 s wait for more replicas.
        '--repl-diskless-sync-delay',
        '0',
        '--cluster-announce-ip',
        '127.0.0.1',
        ...(password === undefined ? [] : ['--requirepass', password, '--masterauth', password]),
      ],
      { stdio: 'ignore' },
    )
    children.set(port, child)
  }

  const node = (port: number): Redis => {
    const c = new Redis(port, '127.0.0.1', {
      ...(password === undefined ? {} : { password }),
      maxRetriesPerRequest: 1,
    })
    c.on('error', () => {})
    clients.push(c)
    return c
  }
  const probes = new Map<number, Redis>()
  const probe = (port: number): Redis => {
    let c = probes.get(port)
    if (!c) {
      c = node(port)
      probes.set(port, c)
    }
    return c
  }
  const dropProbe = (port: number): void => {
    probes.get(port)?.disconnect()
    probes.delete(port)
  }

  const nodesSeenBy = async (port: number): Promise<NodeLine[]> =>
    nodeLines((await probe(port).call('CLUSTER', 'NODES')) as string)

  /** Every port in `live` reports the cluster ok with all slots served, and every replica's link is up. */
  const healthy = async (live: readonly number[], expectReplicas: number): Promise<boolean> => {
    try {
      for (const port of live) {
        const info = infoFields((await probe(port).call('CLUSTER', 'INFO')) as string)
        if (info.cluster_state !== 'ok') return false
        if (info.cluster_slots_assigned !== String(SLOTS) || info.cluster_slots_ok !== String(SLOTS))
          return false
      }
      const seen = await nodesSeenBy(live[0] as number)
      const replicas = seen.filter((n) => n.flags.includes('slave') && !n.flags.includes('fail'))
      if (replicas.length < expectReplicas) return false
      for (const r of replicas) {
        const repl = infoFields((await probe(r.port).info('replication')) as string)
        if (repl.master_link_status !== 'up') return false
      }
      return true
    } catch {
      return false
    }
  }

  const stop = async (): Promise<void> => {
    for (const c of clients) c.disconnect()
    await killAll([...children.values()])
    await rm(dir, { recursive: true, force: true })
  }

  try {
    ports = await clusterPorts(masterCount * (1 + replicasPerMaster))
    for (const port of ports) spawnNode(port)
    for (const port of ports) await waitForRedis(port, password)
    await run(
      'redis-cli',
      [
        ...(password === undefined ? [] : ['-a', password, '--no-auth-warning']),
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        String(replicasPerMaster),
        '--cluster-yes',
      ],
      { timeout: WAIT_MS },
    )
    await until('the Redis Cluster is ok on every node', () =>
      healthy(ports, masterCount * replicasPerMaster),
    )
  } catch (err) {
    await stop()
    throw err
  }

  const live = new Set(ports)
  let replicaCount = masterCount * replicasPerMaster

  const masters = async (): Promise<ClusterMaster[]> => {
    const seen = await nodesSeenBy([...live][0] as number)
    return seen
      .filter((n) => n.flags.includes('master') && !n.flags.includes('fail') && n.slots.length > 0)
      .map((n) => ({ id: n.id, port: n.port, addr: `127.0.0.1:${n.port}`, firstSlot: firstSlotOf(n.slots) }))
      .sort((a, b) => a.firstSlot - b.firstSlot)
  }

  return {
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    ports,
    password,
    masters,
    node,
    stop,
    pids: () => [...children.values()].map((c) => c.pid ?? 0),
    async killMaster(index = 0, killOpts = {}) {
      const current = await masters()
      const victim = current[index]
      if (!victim) throw new Error(`no master at index ${index} (${current.length} masters)`)
      const replicaIds = (await nodesSeenBy(victim.port))
        .filter((n) => n.masterId === victim.id && n.flags.includes('slave'))
        .map((n) => n.id)
      if (replicaIds.length === 0) throw new Error(`master ${victim.addr} has no replica to promote`)
      const child = children.get(victim.port)
      if (child) await killAll([child])
      children.delete(victim.port)
      live.delete(victim.port)
      dropProbe(victim.port)
      // The promoted replica is a master now; any other replica of the victim follows it.
      replicaCount -= 1
      const replicasLeft = replicaCount
      let promoted: ClusterMaster | undefined
      await until(`a replica of ${victim.addr} is promoted and the cluster is ok`, async () => {
        const now = await masters().catch(() => [])
        promoted = now.find((m) => replicaIds.includes(m.id) && m.firstSlot === victim.firstSlot)
        return promoted !== undefined && (await healthy([...live], replicasLeft))
      })
      if (killOpts.rejoin) {
        spawnNode(victim.port)
        await waitForRedis(victim.port, password)
        live.add(victim.port)
        replicaCount += 1
        await until(`${victim.addr} rejoins as a replica in sync`, async () => {
          const me = (await nodesSeenBy(victim.port).catch(() => [])).find((n) => n.flags.includes('myself'))
          return me?.flags.includes('slave') === true && (await healthy([...live], replicasLeft + 1))
        })
      }
      return promoted as ClusterMaster
    },
  }
}
