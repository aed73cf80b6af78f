import {
  MAX_INSTALLATIONS,
  mergeInstallation,
  sortInstallations,
  type TeamsInstallation,
  type TeamsInstallationStore,
} from '../chat/msteams/installations.ts'
import type { RedisClient } from './connections.ts'
import type { ClusterKeys } from './keys.ts'

/**
 * The cluster's {@link TeamsInstallationStore}: one hash, conversation id → installation JSON, shared by every
 * replica (Teams may deliver an install to any of them and an admin may ask any other). A read-modify-write
 * keeps the first `installedAt`; two replicas racing on one conversation write the same facts.
 */
export class RedisTeamsInstallationStore implements TeamsInstallationStore {
  readonly #redis: RedisClient
  readonly #key: string

  constructor(command: RedisClient, keys: ClusterKeys) {
    this.#redis = command
    this.#key = keys.teamsInstallations
  }

  async put(installation: TeamsInstallation): Promise<void> {
    const raw = await this.#redis.hget(this.#key, installation.conversationId)
    if (raw === null && (await this.#redis.hlen(this.#key)) >= MAX_INSTALLATIONS)
      throw new Error('too many installations')
    const previous = raw === null ? undefined : parse(raw)
    await this.#redis.hset(
      this.#key,
      installation.conversationId,
      JSON.stringify(mergeInstallation(previous, installation)),
    )
  }

  async remove(conversationId: string, teamId?: string): Promise<void> {
    const ids = [conversationId]
    if (teamId !== undefined)
      for (const i of await this.list()) if (i.teamId === teamId) ids.push(i.conversationId)
    await this.#redis.hdel(this.#key, ...ids)
  }

  async list(): Promise<TeamsInstallation[]> {
    const all = await this.#redis.hvals(this.#key)
    return sortInstallations(all.map(parse).filter((i): i is TeamsInstallation => i !== undefined))
  }
}

function parse(raw: string): TeamsInstallation | undefined {
  try {
    return JSON.parse(raw) as TeamsInstallation
  } catch {
    return undefined
  }
}
