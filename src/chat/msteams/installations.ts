import type { TeamsActivity } from './activity.ts'

/** Where the Teams bot is installed: a team's channel or a group chat, with what a notify-file entry needs. */
export interface TeamsInstallation {
  /** The conversation id to paste into the notify file (`19:…@thread.tacv2`). */
  readonly conversationId: string
  /** The connector's address for it (`https://smba.trafficmanager.net/amer/`). */
  readonly serviceUrl: string
  readonly tenantId: string
  /** `channel` or `groupChat`. */
  readonly conversationType: string
  readonly teamId?: string
  readonly teamName?: string
  readonly channelName?: string
  /** When it was first recorded, and last changed (ISO 8601). */
  readonly installedAt: string
  readonly updatedAt: string
}

/** Installations recorded from `conversationUpdate` activities: one replica's memory, or Redis. */
export interface TeamsInstallationStore {
  /** Records or refreshes `installation` (its first `installedAt` is kept). */
  put(installation: TeamsInstallation): Promise<void>
  /** Forgets the conversation, and every conversation of the team `teamId` when given (the bot was removed). */
  remove(conversationId: string, teamId?: string): Promise<void>
  /** Every installation, the most recently changed first. */
  list(): Promise<TeamsInstallation[]>
}

/** At most this many are kept; an installation beyond it is not recorded (and logged). */
export const MAX_INSTALLATIONS = 10_000

/** The change a `conversationUpdate` makes to the installations, or null when it makes none. */
export type InstallationChange =
  | { readonly kind: 'put'; readonly installation: TeamsInstallation }
  | { readonly kind: 'remove'; readonly conversationId: string; readonly teamId?: string }

/**
 * What a checked `conversationUpdate` means for the installations: the bot added to a team or group chat
 * (itself among `membersAdded`), a channel created or renamed in an installed team (its conversation id is
 * the channel's id), the bot removed (the team's entries go), a channel deleted. 1:1 chats are not recorded:
 * nothing is posted to them from the notify file.
 */
export function installationChange(
  activity: TeamsActivity,
  botId: string,
  now: Date,
): InstallationChange | null {
  const type = activity.conversation.conversationType
  if (type === 'personal' || activity.type !== 'conversationUpdate') return null
  const data = activity.channelData
  const isBot = (m: { id: string }) => m.id === botId || m.id === activity.recipient?.id
  const teamId = data?.team?.id
  const conversationId = activity.conversation.id.split(';')[0] ?? activity.conversation.id
  if (activity.membersRemoved?.some(isBot))
    return { kind: 'remove', conversationId, ...(teamId ? { teamId } : {}) }
  const base = {
    serviceUrl: activity.serviceUrl,
    tenantId: data?.tenant?.id ?? activity.conversation.tenantId ?? '',
    installedAt: now.toISOString(),
    updatedAt: now.toISOString(),
    ...(teamId ? { teamId } : {}),
    ...(data?.team?.name ? { teamName: data.team.name } : {}),
  }
  const event = data?.eventType
  const channelId = data?.channel?.id
  if (event === 'channelDeleted' && channelId) return { kind: 'remove', conversationId: channelId }
  if ((event === 'channelCreated' || event === 'channelRenamed' || event === 'channelRestored') && channelId)
    return {
      kind: 'put',
      installation: {
        ...base,
        conversationId: channelId,
        conversationType: 'channel',
        ...(data?.channel?.name ? { channelName: data.channel.name } : {}),
      },
    }
  if (activity.membersAdded?.some(isBot) || event === 'teamRenamed')
    return {
      kind: 'put',
      installation: {
        ...base,
        conversationId,
        conversationType: type ?? 'channel',
        // A team's first conversation is its General channel, which Teams names by no name.
        ...(data?.channel?.name
          ? { channelName: data.channel.name }
          : type === 'channel'
            ? { channelName: 'General' }
            : {}),
      },
    }
  return null
}

/** One replica's {@link TeamsInstallationStore}. */
export class MemoryTeamsInstallationStore implements TeamsInstallationStore {
  readonly #byId = new Map<string, TeamsInstallation>()

  async put(installation: TeamsInstallation): Promise<void> {
    const previous = this.#byId.get(installation.conversationId)
    if (previous === undefined && this.#byId.size >= MAX_INSTALLATIONS)
      throw new Error('too many installations')
    this.#byId.set(installation.conversationId, mergeInstallation(previous, installation))
  }

  async remove(conversationId: string, teamId?: string): Promise<void> {
    this.#byId.delete(conversationId)
    if (teamId !== undefined) for (const [id, i] of this.#byId) if (i.teamId === teamId) this.#byId.delete(id)
  }

  async list(): Promise<TeamsInstallation[]> {
    return sortInstallations([...this.#byId.values()])
  }
}

/** `next` over `previous`: first installed when first recorded; names kept when the update has none. */
export function mergeInstallation(
  previous: TeamsInstallation | undefined,
  next: TeamsInstallation,
): TeamsInstallation {
  if (previous === undefined) return next
  return { ...previous, ...next, installedAt: previous.installedAt }
}

/** The most recently changed first. */
export function sortInstallations(list: TeamsInstallation[]): TeamsInstallation[] {
  return list.sort(
    (a, b) => b.updatedAt.localeCompare(a.updatedAt) || a.conversationId.localeCompare(b.conversationId),
  )
}
