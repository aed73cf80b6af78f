import type { ChainableCommander } from 'ioredis'
import type { RedisClient } from './connections.ts'

/**
 * Commands on the keys of one hash slot (one session's keys, one person's set, one key), added to a MULTI or a
 * pipeline by {@link transaction} and {@link pipelined}.
 */
export type SlotStep = (commands: ChainableCommander) => unknown

/**
 * Writes that belong together. With one Redis (or Sentinel): one MULTI of every step, atomic as it always
 * was. On a Redis Cluster a MULTI may touch one slot only, so each step is a MULTI of its own, run in the
 * given order, each once the previous one succeeded. Order the steps so that stopping between two leaves a
 * safe state: an index entry whose record is missing (readers skip it), never a record its index misses (a
 * logout everywhere would not find it). Rejects with the first command that failed; resolves with every
 * command's reply, in order.
 */
export async function transaction(client: RedisClient, steps: readonly SlotStep[]): Promise<unknown[]> {
  if (!client.isCluster) {
    const multi = client.multi()
    for (const step of steps) step(multi)
    return replies(await multi.exec())
  }
  const out: unknown[] = []
  for (const step of steps) {
    const multi = client.multi()
    step(multi)
    if (multi.length > 0) out.push(...replies(await multi.exec()))
  }
  return out
}

/**
 * Commands with no atomicity between them (reads, refreshes), one group per slot. With one Redis: one
 * pipeline, as before. On a Redis Cluster: one pipeline per group, all sent at once (ioredis refuses a
 * pipeline whose keys are served by more than one node, and a group's keys share a slot, hence a node).
 * Resolves with `[error, reply]` per command, in order, like `pipeline.exec()`.
 */
export async function pipelined(
  client: RedisClient,
  groups: readonly SlotStep[],
): Promise<[Error | null, unknown][]> {
  if (!client.isCluster) {
    const pipeline = client.pipeline()
    for (const group of groups) group(pipeline)
    return pipeline.length === 0 ? [] : ((await pipeline.exec()) ?? [])
  }
  const results = await Promise.all(
    groups.map(async (group) => {
      const pipeline = client.pipeline()
      group(pipeline)
      return pipeline.length === 0 ? [] : ((await pipeline.exec()) ?? [])
    }),
  )
  return results.flat()
}

/** The replies of an EXEC; a failed command (in its results, not a rejection) rejects. */
function replies(results: [Error | null, unknown][] | null): unknown[] {
  const err = results?.find(([e]) => e)?.[0]
  if (err) throw err
  return (results ?? []).map(([, reply]) => reply)
}
