import type { SessionRegistry, SessionView } from '../sessions/types.ts'
import { admitUpstream } from '../sessions/upstream-admission.ts'
import type { UrlPolicy } from '../upstream/url-policy.ts'

/** A change to the registry that comes from Kasm: a launched session, or a new address the sync learned. */
export type KasmRegistration =
  | {
      readonly kind: 'launch'
      readonly kasmId: string
      readonly upstream: string
      readonly team: string
      readonly messagingToken: string
      /** The Kasm user the session runs as (who destroys it). */
      readonly kasmUserId: string
    }
  | {
      readonly kind: 'relocate'
      readonly kasmId: string
      readonly team: string
      readonly upstream: string
      readonly version: number
    }

/**
 * The one way a session learned from Kasm enters the registry: the launch route and the Kasm sync both come
 * here, so the URL policy on upstreams (`admitUpstream`: which addresses the gateway may connect to, and no
 * runtime of another team) applies to every URL Kasm hands the gateway before the registry sees it.
 */
export async function registerFromKasm(
  sessions: SessionRegistry,
  policy: UrlPolicy,
  change: KasmRegistration,
): Promise<SessionView> {
  await admitUpstream(policy, sessions, {
    kasmId: change.kasmId,
    team: change.team,
    upstream: change.upstream,
  })
  if (change.kind === 'relocate') return sessions.relocate(change.kasmId, change.upstream, change.version)
  const { kasmId, upstream, team, messagingToken, kasmUserId } = change
  return sessions.put({ kasmId, upstream, team, messagingToken, kasmUserId, source: 'launch' })
}
