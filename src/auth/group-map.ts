import type { Role } from './operator.ts'

/** What one identity-provider group grants: roles and teams of the gateway. */
export interface GroupGrant {
  readonly roles: readonly Role[]
  readonly teams: readonly string[]
}

/** GATEWAY_OIDC_GROUP_MAP parsed: group name (exactly as the IdP emits it) to what it grants. */
export type GroupMap = ReadonlyMap<string, GroupGrant>

const roles: ReadonlySet<string> = new Set(['viewer', 'operator', 'admin'])

/**
 * Parses `group=grant grant…; group=grant…` where a grant is a role (`viewer`, `operator`, `admin`) or
 * `team:<name>` (`team:*` for every team), e.g. `kasm-admins=admin team:*; support-blue=operator team:blue`.
 * Entries are separated by `;` or new lines; group names are taken as written (trimmed), so Keycloak paths
 * (`/support/blue`) and Entra object ids fit. Throws an Error naming the first bad entry.
 */
export function parseGroupMap(text: string): GroupMap {
  const map = new Map<string, GroupGrant>()
  for (const raw of text.split(/[;\n]/)) {
    const entry = raw.trim()
    if (entry === '') continue
    const eq = entry.indexOf('=')
    const group = eq < 0 ? '' : entry.slice(0, eq).trim()
    const grants =
      eq < 0
        ? []
        : entry
            .slice(eq + 1)
            .split(/[\s,]+/)
            .filter((g) => g !== '')
    if (group === '' || grants.length === 0) throw new Error(`"${entry}" is not group=grant…`)
    const granted = { roles: [] as Role[], teams: [] as string[] }
    for (const grant of grants) {
      if (roles.has(grant)) granted.roles.push(grant as Role)
      else if (/^team:[^\s,;=]+$/.test(grant)) granted.teams.push(grant.slice('team:'.length))
      else
        throw new Error(
          `"${grant}" in "${entry}" is neither a role (viewer, operator, admin) nor team:<name>`,
        )
    }
    const before = map.get(group)
    map.set(group, {
      roles: [...new Set([...(before?.roles ?? []), ...granted.roles])],
      teams: [...new Set([...(before?.teams ?? []), ...granted.teams])],
    })
  }
  return map
}
