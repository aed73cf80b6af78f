import type { Cluster } from 'ioredis'
import type { LiveChannels } from './live-loop.ts'

/**
 * The live channels over a Redis Cluster connection opened with `shardedSubscribers` (role `live`): ioredis
 * keeps one subscriber connection per master, `SSUBSCRIBE` goes to the master of the channel's slot (the
 * session's: `live:{kasmId}`), where the append script's `SPUBLISH` is heard.
 *
 * - One `SSUBSCRIBE` per channel: ioredis refuses a call whose channels hash to different slots, and the
 *   loop's calls name many sessions.
 * - Ready again: the cluster's `ready`, and `subscribersReady`, which ioredis emits once it has replaced the
 *   subscribers after a topology change (a failover promoted a replica): publications made meanwhile went to
 *   a master nobody listened on, so the loop subscribes every channel again and reads each stream from its
 *   cursor, as after any reconnect.
 * - `ping` asks the cluster, not each subscriber connection (ioredis does not expose them): a subscriber whose
 *   node died is noticed by ioredis itself (`-node`, then a slots refresh and new subscribers).
 */
export function clusterLiveChannels(connection: Cluster): LiveChannels {
  const each = (channels: readonly string[], call: (channel: string) => Promise<unknown>) =>
    Promise.all(channels.map(call))
  return {
    subscribe: (channels) => each(channels, (c) => connection.ssubscribe(c)),
    unsubscribe: (channels) => each(channels, (c) => connection.sunsubscribe(c)),
    onMessage: (listener) => {
      connection.on('smessageBuffer', (channel: Buffer, payload: Buffer) =>
        listener(channel.toString(), payload),
      )
    },
    onReady: (listener) => {
      connection.on('ready', listener)
      connection.on('subscribersReady', listener)
    },
    get ready() {
      return connection.status === 'ready'
    },
    ping: () => connection.ping(),
    reconnect: () => connection.disconnect(true),
  }
}
