import type { Config } from '../../config.ts'
import type { GroupMap } from '../group-map.ts'

/** Sign-in through the identity provider, from GATEWAY_OIDC_* (see config.ts for the checks at boot). */
export interface OidcSettings {
  readonly issuer: URL
  readonly clientId: string
  readonly clientSecret: string
  /** Space-separated, always with `openid`. */
  readonly scopes: string
  /** Where the IdP sends the person back: GATEWAY_OIDC_REDIRECT_URI, else the public origin + base + `auth/callback`. */
  readonly redirectUri: string
  /** Where the IdP sends the person after RP-initiated logout: the redirect URI's origin + base + `auth/logged-out`. */
  readonly postLogoutRedirectUri: string
  readonly claims: { readonly roles: string; readonly teams: string; readonly groups: string }
  readonly groupMap: GroupMap
  /** How often roles and teams are refreshed with the refresh token. */
  readonly refreshMs: number
  /** Each request to the IdP (discovery, token, userinfo, keys) gives up after this. */
  readonly timeoutMs: number
  /** Plain http to the IdP: only outside production (the demo and the tests run one on loopback). */
  readonly allowHttp: boolean
}

/** The sign-in settings, or null when no identity provider is configured. */
export function oidcSettings(config: Config): OidcSettings | null {
  const { env } = config
  const issuer = env.GATEWAY_OIDC_ISSUER
  if (
    issuer === undefined ||
    env.GATEWAY_OIDC_CLIENT_ID === undefined ||
    env.GATEWAY_OIDC_CLIENT_SECRET === undefined
  )
    return null
  const redirectUri =
    env.GATEWAY_OIDC_REDIRECT_URI ?? `${env.GATEWAY_PUBLIC_ORIGIN ?? ''}${config.basePath}auth/callback`
  return {
    issuer: new URL(issuer),
    clientId: env.GATEWAY_OIDC_CLIENT_ID,
    clientSecret: env.GATEWAY_OIDC_CLIENT_SECRET,
    scopes: env.GATEWAY_OIDC_SCOPES.trim().split(/\s+/).join(' '),
    redirectUri,
    postLogoutRedirectUri: `${new URL(redirectUri).origin}${config.basePath}auth/logged-out`,
    claims: {
      roles: env.GATEWAY_ROLES_CLAIM,
      teams: env.GATEWAY_TEAMS_CLAIM,
      groups: env.GATEWAY_OIDC_GROUPS_CLAIM,
    },
    groupMap: env.GATEWAY_OIDC_GROUP_MAP,
    refreshMs: env.GATEWAY_OIDC_REFRESH_S * 1000,
    timeoutMs: env.GATEWAY_OIDC_TIMEOUT_MS,
    allowHttp: !config.production,
  }
}
