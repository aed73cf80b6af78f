import { UpstreamConflict, UpstreamNotAllowed } from '../errors.ts'
import type { UrlPolicy } from '../upstream/url-policy.ts'
import type { SessionRegistry } from './types.ts'

/** What is being registered: a session of `team` served by `upstream` (absent: built from the template). */
export interface Admission {
  readonly kasmId: string
  readonly team: string
  readonly upstream?: string
}

/**
 * The one check every registration from outside the deployer's configuration goes through (the admin API
 * today; sessions launched or discovered through Kasm's API later): the URL policy (upstream/url-policy.ts)
 * and the rule that an upstream already serving a session of another team cannot be registered again, which
 * would hand that team's runtime to this one. Throws 400 `upstream_not_allowed` or 409 `upstream_conflict`.
 * An upstream built from the template is the deployer's and passes.
 */
export async function admitUpstream(
  policy: UrlPolicy,
  sessions: SessionRegistry,
  wanted: Admission,
): Promise<void> {
  if (wanted.upstream === undefined) return
  const refusal = await policy.check(wanted.upstream)
  if (refusal !== undefined) throw new UpstreamNotAllowed(refusal.reason)
  const mine = runtimeOf(wanted.upstream)
  let myAddresses: Promise<string[]> | undefined
  for (const other of await sessions.list()) {
    if (other.kasmId === wanted.kasmId || other.team === wanted.team) continue
    const theirs = runtimeOf(other.upstream)
    if (theirs.key === mine.key) throw new UpstreamConflict()
    // The same scheme, port and path under another name: the same runtime if the names share an address.
    if (theirs.rest !== mine.rest) continue
    myAddresses ??= policy.resolve(mine.host).catch(() => [])
    const overlap = new Set(await myAddresses)
    const their = await policy.resolve(theirs.host).catch(() => [] as string[])
    if (their.some((a) => overlap.has(a))) throw new UpstreamConflict()
  }
}

/** Percent-encodings of unreserved characters, which a server reads as the characters themselves. */
const UNRESERVED_ESCAPE = /%(2[dDeE]|3[0-9]|[46][1-9a-fA-F]|[57][0-9aA]|5[fF]|7[eE])/g

/**
 * A key under which two spellings of one runtime's base URL are equal: the URL parser's normal form (host case,
 * default port, IPv4 and IPv6 forms, dot segments), a host without its trailing dot, unreserved characters
 * unescaped, other escapes in upper case, runs of `/` as one, and a trailing `/`. `rest` is the key without
 * its host name, `host` the name alone.
 */
export function runtimeOf(raw: string): { key: string; host: string; rest: string } {
  const url = new URL(raw)
  const host = url.hostname.replace(/\.$/, '')
  const path = url.pathname
    .replace(UNRESERVED_ESCAPE, (e) => String.fromCharCode(Number.parseInt(e.slice(1), 16)))
    .replace(/%[0-9a-f]{2}/gi, (e) => e.toUpperCase())
    .replace(/\/{2,}/g, '/')
  const rest = `${url.protocol}//:${url.port}${path.endsWith('/') ? path : `${path}/`}`
  return { key: `${host} ${rest}`, host, rest }
}
