import type { SessionRegistry, SessionView } from '../sessions/types.ts'

/** A change to the registry that comes from Kasm: a launched session, or a new address the sync learned. */
export type KasmRegistration =
  | {
      readonly kind: 'launch'
      readonly kasmId: string
      readonly upstream: string
      readonly team: string
      readonly messagingToken: string
    }
  | {
      readonly kind: 'relocate'
      readonly kasmId: string
      readonly upstream: string
      readonly version: number
    }

/**
 * The one way a session learned from Kasm enters the registry: the launch route and the Kasm sync both come
 * here, so a policy on the upstream URLs Kasm gives the gateway (which addresses it may connect to) applies to
 * every one of them when it is added in this function, before the registry sees the URL.
 */
export async function registerFromKasm(
  sessions: SessionRegistry,
  change: KasmRegistration,
): Promise<SessionView> {
  if (change.kind === 'relocate') return sessions.relocate(change.kasmId, change.upstream, change.version)
  const { kasmId, upstream, team, messagingToken } = change
  return sessions.put({ kasmId, upstream, team, messagingToken, source: 'launch' })
}
