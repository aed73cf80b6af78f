/** A throwaway redis-server for a bench, and what it has been asked so far (INFO). */
import { spawn } from 'node:child_process'
import { Redis } from 'ioredis'
import { freePort, sleep } from './orchestrator.ts'

/** A redis-server of the bench's own (free port, no persistence) and a client to read its INFO with. */
export interface BenchRedis {
  url: string
  pid: number
  client: Redis
  stop(): Promise<void>
}

/** Starts a redis-server without persistence on a free port and waits until it answers. */
export async function startRedis(): Promise<BenchRedis> {
  const port = await freePort()
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  )
  const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 })
  client.on('error', () => {})
  for (let i = 0; i < 100 && client.status !== 'ready'; i++) await sleep(50)
  return {
    url: `redis://127.0.0.1:${port}`,
    pid: child.pid ?? 0,
    client,
    async stop() {
      client.disconnect()
      child.kill('SIGKILL')
    },
  }
}

/** INFO total_commands_processed. */
export async function commandsProcessed(redis: Redis): Promise<number> {
  const info = await redis.info('stats')
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0)
}

/**
 * INFO total_reads_processed: the socket reads Redis made, about one per round trip of any client (a pipeline
 * that arrives in one read counts once).
 */
export async function readsProcessed(redis: Redis): Promise<number> {
  const info = await redis.info('stats')
  return Number(/total_reads_processed:(\d+)/.exec(info)?.[1] ?? 0)
}

/** Calls per command (INFO commandstats); commands run inside scripts are counted under their own names. */
export async function commandStats(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats')
  const out: Record<string, number> = {}
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1] as string] = Number(m[2])
  return out
}

/** `after - before` per command, without the zeros. */
export function commandDelta(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  const out: Record<string, number> = {}
  for (const [name, calls] of Object.entries(after)) {
    const d = calls - (before[name] ?? 0)
    if (d > 0) out[name] = d
  }
  return out
}
