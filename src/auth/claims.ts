import type { JWTPayload } from 'jose'
import { parseRoles, type Role, toStrings } from './operator.ts'

/** Who a verified token (or a login ticket) says the operator is, in the shape a cookie session stores. */
export interface OperatorClaims {
  sub: string
  name?: string
  roles: Role[]
  teams: string[]
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Reads a claim by name or dotted path. The whole name is tried first so that URL-like claim names
 * (`https://example.com/roles`) work; then the name is split at a dot, longest known prefix first, and the
 * rest is looked up inside that object (`realm_access.roles`, or `https://ns.example/claims.roles`).
 * Only own properties are read, so `__proto__` or `constructor` paths find nothing.
 */
export function claimAt(payload: Record<string, unknown>, path: string): unknown {
  if (Object.hasOwn(payload, path)) return payload[path]
  for (let dot = path.lastIndexOf('.'); dot > 0; dot = path.lastIndexOf('.', dot - 1)) {
    const head = path.slice(0, dot)
    if (!Object.hasOwn(payload, head)) continue
    const inner = payload[head]
    if (!isRecord(inner)) continue
    const found = claimAt(inner, path.slice(dot + 1))
    if (found !== undefined) return found
  }
  return undefined
}

/** Names of the claims that carry roles and teams (`GATEWAY_ROLES_CLAIM`, `GATEWAY_TEAMS_CLAIM`). */
export interface ClaimNames {
  roles: string
  teams: string
}

/**
 * Maps a verified JWT payload to operator claims. `sub` must be a non-empty string (checked by the
 * verifier); unknown role names are dropped, so a token without a known role authenticates but is
 * refused every route (403) rather than treated as a viewer.
 */
export function operatorClaims(payload: JWTPayload, names: ClaimNames): OperatorClaims {
  const name = [payload.name, payload.preferred_username].find(
    (v): v is string => typeof v === 'string' && v.length > 0,
  )
  return {
    sub: payload.sub ?? '',
    ...(name === undefined ? {} : { name }),
    roles: [...parseRoles(claimAt(payload, names.roles))],
    teams: [...new Set(toStrings(claimAt(payload, names.teams)))],
  }
}

/** The claims alone, copied (never shared with the caller): what a stored session or link keeps. */
export function copyClaims(claims: OperatorClaims): OperatorClaims {
  return {
    sub: claims.sub,
    ...(claims.name === undefined ? {} : { name: claims.name }),
    roles: [...claims.roles],
    teams: [...claims.teams],
  }
}
