import { claimAt, type OperatorClaims } from '../claims.ts'
import type { GroupMap } from '../group-map.ts'
import { parseRoles, toStrings } from '../operator.ts'
import type { IdpAnswer } from './client.ts'
import type { OidcSettings } from './settings.ts'

/**
 * Who the IdP says the person is, in the shape a cookie session stores. Each claim (GATEWAY_ROLES_CLAIM,
 * GATEWAY_TEAMS_CLAIM, GATEWAY_OIDC_GROUPS_CLAIM; dotted paths) comes from the ID token, else from userinfo.
 * Roles and teams are those claims plus whatever GATEWAY_OIDC_GROUP_MAP grants for the person's groups;
 * unknown role names are dropped, so someone with none gets the "no role" page instead of a session.
 */
export function identityOf(
  answer: IdpAnswer,
  settings: Pick<OidcSettings, 'claims' | 'groupMap'>,
): OperatorClaims {
  const pick = (path: string): unknown =>
    claimAt(answer.idClaims, path) ?? (answer.userinfo && claimAt(answer.userinfo, path))
  const roles = parseRoles(pick(settings.claims.roles))
  const teams = new Set(toStrings(pick(settings.claims.teams)))
  for (const grant of granted(toStrings(pick(settings.claims.groups)), settings.groupMap)) {
    for (const role of grant.roles) roles.add(role)
    for (const team of grant.teams) teams.add(team)
  }
  const name = ['name', 'preferred_username', 'email']
    .map(pick)
    .find((v): v is string => typeof v === 'string' && v.length > 0)
  const sub = answer.idClaims.sub
  return {
    sub: typeof sub === 'string' ? sub : '',
    ...(name === undefined ? {} : { name: name.slice(0, 200) }),
    roles: [...roles],
    teams: [...teams],
  }
}

function granted(groups: readonly string[], map: GroupMap) {
  return groups.flatMap((g) => {
    const grant = map.get(g)
    return grant === undefined ? [] : [grant]
  })
}
