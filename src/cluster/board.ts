import type { SessionBoard } from '../summary/board.ts'
import type { ChangeFeed } from './change-feed.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'
import type { ClusterCommands } from './scripts.ts'

/** Options of {@link RedisBoard}. */
export interface RedisBoardOptions {
  readonly command: RedisClient & ClusterCommands
  readonly feed: ChangeFeed
  readonly keys: ClusterKeys
}

/** A board outlives its last write by a day: questions and pauses are much shorter than that. */
const BOARD_TTL_MS = 24 * 3600 * 1000

/**
 * The cluster's {@link SessionBoard}: one hash per session, every write followed by a publish of the
 * session's id on one channel, so each replica re-reads the boards it shows. Compare-and-delete is a script
 * (a claim is released only by its holder, even when two replicas race).
 */
export class RedisBoard implements SessionBoard {
  readonly #o: RedisBoardOptions
  readonly #listeners = new Set<(kasmId: string | null) => void>()
  #unlisten: Promise<() => void> | null = null

  constructor(options: RedisBoardOptions) {
    this.#o = options
  }

  async read(kasmId: string): Promise<ReadonlyMap<string, string>> {
    return new Map(Object.entries(await this.#o.command.hgetall(this.#o.keys.board(kasmId))))
  }

  async set(kasmId: string, field: string, value: string, onlyIfAbsent = false): Promise<boolean> {
    const { command, keys } = this.#o
    const key = keys.board(kasmId)
    const pipeline = command.pipeline()
    if (onlyIfAbsent) pipeline.hsetnx(key, field, value)
    else pipeline.hset(key, field, value)
    pipeline.pexpire(key, BOARD_TTL_MS)
    const results = await pipeline.exec()
    const failed = results?.find(([err]) => err)?.[0]
    if (failed) throw failed
    const written = !onlyIfAbsent || results?.[0]?.[1] === 1
    if (written) await command.publish(keys.boardChannel, kasmId)
    return written
  }

  async delete(kasmId: string, field: string, expected?: string): Promise<boolean> {
    const { command, keys } = this.#o
    const key = keys.board(kasmId)
    const deleted =
      expected === undefined
        ? await command.hdel(key, field)
        : await command.krgBoardDelete(key, field, expected)
    if (deleted > 0) await command.publish(keys.boardChannel, kasmId)
    return deleted > 0
  }

  onChange(listener: (kasmId: string | null) => void): () => void {
    this.#listeners.add(listener)
    this.#unlisten ??= this.#o.feed.listen(this.#o.keys.boardChannel, {
      message: (kasmId) => {
        for (const l of this.#listeners) l(kasmId)
      },
      resync: () => {
        for (const l of this.#listeners) l(null)
      },
    })
    return () => this.#listeners.delete(listener)
  }

  async drop(kasmId: string): Promise<void> {
    const { command, keys } = this.#o
    if ((await command.del(keys.board(kasmId))) > 0) await command.publish(keys.boardChannel, kasmId)
  }

  async close(): Promise<void> {
    this.#listeners.clear()
    const unlisten = this.#unlisten
    this.#unlisten = null
    if (unlisten !== null) (await unlisten)()
  }
}
