import type { ChatKind } from '../identity/chat-link-store.ts'

/** What an operator's role lets them do. `admin` implies `operator` implies `viewer`. */
export type Role = 'viewer' | 'operator' | 'admin'

/** The access a route needs. */
export type Access = 'read' | 'write' | 'admin'

/**
 * An authenticated person, from a verified JWT, a cookie session or a linked chat account (`slack`: an answer
 * given in Slack, made through the gateway's own write path). Never holds the credential itself.
 */
export interface Operator {
  /** The JWT `sub`: the stable id written to audit records. */
  readonly sub: string
  readonly name?: string
  readonly roles: ReadonlySet<Role>
  /** Teams whose sessions this operator may see; `*` means every team. */
  readonly teams: ReadonlySet<string>
  readonly via: 'bearer' | 'cookie' | ChatKind
  /** When the credential stops being valid (ms since epoch): token `exp`, cookie or chat link expiry. */
  readonly expiresAt: number
  /** The server-side cookie session id hash, when authenticated by cookie (for revocation checks). */
  readonly cookieSessionId?: string
  /** The linked chat account's key (`slack:T…:U…`), when it acts through a chat link. */
  readonly chatLink?: string
}

const rank: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 }
const needed: Record<Access, number> = { read: 1, write: 2, admin: 3 }

/** Whether any of the operator's roles grants `access`. */
export function allows(operator: Operator, access: Access): boolean {
  let best = 0
  for (const role of operator.roles) best = Math.max(best, rank[role])
  return best >= needed[access]
}

/** Whether the operator may see sessions of `team`. Foreign sessions must look exactly like unknown ones. */
export function seesTeam(operator: Operator, team: string): boolean {
  return operator.teams.has('*') || operator.teams.has(team)
}

/** Parses role names from a claim value, keeping only known roles. */
export function parseRoles(value: unknown): Set<Role> {
  const out = new Set<Role>()
  for (const v of toStrings(value)) if (v === 'viewer' || v === 'operator' || v === 'admin') out.add(v)
  return out
}

/** Claim values come as arrays, space- or comma-separated strings (Okta, Entra, Keycloak differ). */
export function toStrings(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string')
  if (typeof value === 'string') return value.split(/[\s,]+/).filter((s) => s.length > 0)
  return []
}
