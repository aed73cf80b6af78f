import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOptions } from 'node:dns'
import { isIP } from 'node:net'
import ipaddr from 'ipaddr.js'
import { buildConnector } from 'undici'

/**
 * Where the gateway may send requests on behalf of someone who is not the deployer: runtime upstreams
 * registered through the admin API, and (later) webhook targets and sessions found through Kasm's API. The
 * deployer's own configuration (the sessions file, the upstream template) is trusted and never checked.
 *
 * Two rules, checked when a URL is accepted and again on every connection, after DNS, so a name that
 * resolves elsewhere later (DNS rebinding) gains nothing:
 * - with GATEWAY_UPSTREAM_ALLOW set, the host must be listed (a name, `*.domain` for its subdomains) or every
 *   address it resolves to must lie in a listed CIDR;
 * - no address may be loopback, link-local, unspecified, multicast, broadcast, reserved, a cloud metadata
 *   address, or an IPv6 form of one (IPv4-mapped, -compatible, NAT64, 6to4; Teredo altogether), unless it
 *   lies in a listed CIDR (the deployer said so explicitly).
 * Private networks (10/8, 172.16/12, 192.168/16, fc00::/7) are where runtimes live and are allowed.
 * The URL parser has already turned `0x7f000001`, `2130706433`, `0177.0.0.1` and `127.1` into `127.0.0.1`.
 */

/** One entry of an allow list. */
export type AllowEntry =
  | { readonly kind: 'host'; readonly host: string }
  | { readonly kind: 'domain'; readonly suffix: string }
  | { readonly kind: 'cidr'; readonly range: [ipaddr.IPv4 | ipaddr.IPv6, number] }

/** Why a URL or a connection is refused: the `code` is stable, the `reason` says it to a person. */
export interface Refusal {
  readonly code: 'not_http' | 'host_not_allowed' | 'address_refused'
  readonly reason: string
}

/** A DNS lookup with dns.lookup's signature (tests give one that answers what they need). */
export type Lookup = typeof dnsLookup

/** The code of the error a guarded connection fails with (failures.ts answers 502 upstream_address_refused). */
export const ADDRESS_REFUSED = 'ERR_KRG_ADDRESS_REFUSED'

/** A connection the policy refused; `code` is {@link ADDRESS_REFUSED}. */
export class AddressRefused extends Error {
  readonly refusal: Refusal
  readonly code = ADDRESS_REFUSED
  constructor(refusal: Refusal) {
    super(refusal.reason)
    this.refusal = refusal
  }
}

/** Whether `err` (or what it wraps) is a connection the policy refused. */
export function isAddressRefused(err: unknown): boolean {
  for (let e = err, depth = 0; e !== null && typeof e === 'object' && depth < 5; depth++) {
    if ((e as { code?: unknown }).code === ADDRESS_REFUSED) return true
    e = (e as { cause?: unknown }).cause
  }
  return false
}

const HOST_LABELS = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/

/**
 * Parses GATEWAY_UPSTREAM_ALLOW entries: a host name (`runtimes.internal`), a wildcard domain
 * (`*.kasm.internal`: its subdomains, not itself), an address or a CIDR (`10.20.0.0/16`, `fd00::/8`).
 * Throws an Error naming the first entry that is none of these.
 */
export function parseAllowList(entries: readonly string[]): AllowEntry[] {
  return entries.map((raw) => {
    const entry = raw.trim().toLowerCase().replace(/\.$/, '')
    if (entry.includes('/')) {
      try {
        return { kind: 'cidr', range: ipaddr.parseCIDR(entry) }
      } catch {
        throw new Error(`"${raw}" is not a CIDR`)
      }
    }
    if (ipaddr.isValid(entry) && isIP(entry) !== 0) {
      const address = ipaddr.parse(entry)
      return { kind: 'cidr', range: [address, address.kind() === 'ipv4' ? 32 : 128] }
    }
    if (entry.startsWith('*.') && HOST_LABELS.test(entry.slice(2)))
      return { kind: 'domain', suffix: entry.slice(1) }
    if (HOST_LABELS.test(entry)) return { kind: 'host', host: entry }
    throw new Error(`"${raw}" is not a host name, *.domain, address or CIDR`)
  })
}

/** Addresses no untrusted URL may reach whatever their range says: cloud instance metadata services. */
const METADATA = new Set([
  '169.254.169.254',
  '169.254.170.2',
  '100.100.100.200',
  '168.63.129.16',
  'fd00:ec2::254',
])
const REFUSED_V4 = new Set(['unspecified', 'broadcast', 'multicast', 'linkLocal', 'loopback', 'reserved'])
const REFUSED_V6 = new Set([
  'unspecified',
  'loopback',
  'linkLocal',
  'multicast',
  'deprecatedSiteLocal',
  'reserved',
  'discard',
  'teredo',
])

/** The IPv4 address an IPv6 one carries (mapped, compatible, NAT64, 6to4, translated), if any. */
function embeddedV4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const p = address.parts
  const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff])
  const range = address.range()
  if (range === 'ipv4Mapped' || range === 'rfc6145' || range === 'rfc6052') return v4(p[6] ?? 0, p[7] ?? 0)
  if (range === '6to4') return v4(p[1] ?? 0, p[2] ?? 0)
  // IPv4-compatible (::a.b.c.d, deprecated but still routed by some stacks); :: and ::1 are not.
  if (p.slice(0, 6).every((x) => x === 0) && ((p[6] ?? 0) !== 0 || (p[7] ?? 0) > 1))
    return v4(p[6] ?? 0, p[7] ?? 0)
  return undefined
}

/** Why an address is refused by default; undefined when it may be reached. */
export function refusedRange(address: string): string | undefined {
  let parsed: ipaddr.IPv4 | ipaddr.IPv6
  try {
    parsed = ipaddr.parse(address)
  } catch {
    return 'not an address'
  }
  if (METADATA.has(parsed.toString())) return 'a cloud metadata address'
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6
    const inner = embeddedV4(v6)
    if (inner !== undefined) {
      const why = refusedRange(inner.toString())
      return why === undefined ? undefined : `${why} (in an IPv6 form)`
    }
    if (v6.range() === 'rfc6052') return 'a NAT64 address'
    return REFUSED_V6.has(v6.range()) ? `a ${v6.range()} address` : undefined
  }
  const range = (parsed as ipaddr.IPv4).range()
  return REFUSED_V4.has(range) ? `a ${range} address` : undefined
}

/** Options of {@link UrlPolicy}. */
export interface UrlPolicyOptions {
  /** GATEWAY_UPSTREAM_ALLOW, parsed; empty: any host whose addresses are not refused. */
  readonly allow: readonly AllowEntry[]
  /** Origins trusted outright: the upstream template's (the deployer's own configuration). */
  readonly trustedOrigins?: readonly string[]
  /** DNS; default dns.lookup (the system resolver: /etc/hosts, search domains, as every other client). */
  readonly lookup?: Lookup
}

/** The policy; one per app, on `app.upstream.policy`. */
export class UrlPolicy {
  readonly #allow: readonly AllowEntry[]
  readonly #trusted: ReadonlySet<string>
  readonly #lookup: Lookup

  constructor(options: UrlPolicyOptions) {
    this.#allow = options.allow
    this.#trusted = new Set(options.trustedOrigins ?? [])
    this.#lookup = options.lookup ?? dnsLookup
  }

  /** Whether `url`'s origin is the deployer's own (no check applies). */
  trusts(url: string | URL): boolean {
    try {
      return this.#trusted.has(new URL(url).origin)
    } catch {
      return false
    }
  }

  /**
   * Checks a URL given by someone other than the deployer, resolving its host now. Resolves with the refusal,
   * or undefined when the URL may be used (connections to it are still checked: see {@link connector}). A
   * name that does not resolve yet is accepted when the list could allow it (a runtime may be registered
   * before its DNS record exists): what it resolves to is judged on every connection.
   */
  async check(raw: string | URL): Promise<Refusal | undefined> {
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      return { code: 'not_http', reason: 'is not a URL' }
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      return { code: 'not_http', reason: 'must be http(s)' }
    if (this.trusts(url)) return undefined
    const host = hostOf(url.hostname)
    let addresses: string[]
    try {
      addresses = await this.resolve(host)
    } catch {
      if (this.#allow.length === 0 || this.#hostListed(host) || this.#allow.some((e) => e.kind === 'cidr'))
        return undefined
      return { code: 'host_not_allowed', reason: `host ${host} is not in GATEWAY_UPSTREAM_ALLOW` }
    }
    return this.judge(host, addresses)
  }

  /** The rules for a host and what it resolves to now: the refusal, or undefined. */
  judge(host: string, addresses: readonly string[]): Refusal | undefined {
    if (addresses.length === 0) return { code: 'address_refused', reason: `host ${host} resolves to nothing` }
    const listed = this.#allow.length === 0 || this.#hostListed(host)
    for (const address of addresses) {
      const inCidr = this.#inCidr(address)
      if (!listed && !inCidr) {
        return { code: 'host_not_allowed', reason: `host ${host} is not in GATEWAY_UPSTREAM_ALLOW` }
      }
      const why = inCidr ? undefined : refusedRange(address)
      if (why !== undefined) return { code: 'address_refused', reason: `host ${host} resolves to ${why}` }
    }
    return undefined
  }

  /**
   * A DNS lookup for `net.connect` that applies the rules to what a name resolves to at connect time: a
   * name rebound to a refused address fails the connection with {@link AddressRefused}.
   */
  readonly lookup = ((
    hostname: string,
    options: LookupOptions | number | ((...args: unknown[]) => void),
    callback?: (
      err: NodeJS.ErrnoException | null,
      address: string | LookupAddress[],
      family?: number,
    ) => void,
  ): void => {
    const cb = (typeof options === 'function' ? options : callback) as NonNullable<typeof callback>
    const opts: LookupOptions = typeof options === 'object' ? options : {}
    this.#lookup(hostname, { ...opts, all: true } as LookupAllOptions, (err, found) => {
      if (err) return cb(err, [])
      const refusal = this.judge(
        hostOf(hostname),
        found.map((a) => a.address),
      )
      if (refusal !== undefined) return cb(new AddressRefused(refusal), [])
      if (opts.all) return cb(null, found)
      const first = found[0] as LookupAddress
      return cb(null, first.address, first.family)
    })
  }) as unknown as Lookup

  /**
   * An undici connector that checks every connection: an address literal before connecting, a name through
   * {@link lookup}. Give it to the agent of untrusted upstreams.
   */
  connector(options: buildConnector.BuildOptions): buildConnector.connector {
    const connect = buildConnector({ ...options, lookup: this.lookup } as buildConnector.BuildOptions)
    return (target, callback) => {
      const host = hostOf(target.hostname)
      if (isIP(host) !== 0) {
        const refusal = this.judge(host, [host])
        if (refusal !== undefined) {
          callback(new AddressRefused(refusal), null)
          return
        }
      }
      connect(target, callback)
    }
  }

  /** The addresses a host (a URL's hostname) resolves to now; an address literal is its own. */
  resolve(hostname: string): Promise<string[]> {
    const host = hostOf(hostname)
    if (isIP(host) !== 0) return Promise.resolve([ipaddr.process(host).toString()])
    return new Promise((resolve, reject) => {
      this.#lookup(host, { all: true, verbatim: true }, (err, found) =>
        err ? reject(err) : resolve(found.map((a) => ipaddr.process(a.address).toString())),
      )
    })
  }

  #hostListed(host: string): boolean {
    return this.#allow.some(
      (e) => (e.kind === 'host' && e.host === host) || (e.kind === 'domain' && host.endsWith(e.suffix)),
    )
  }

  #inCidr(address: string): boolean {
    let parsed: ipaddr.IPv4 | ipaddr.IPv6
    try {
      parsed = ipaddr.process(address)
    } catch {
      return false
    }
    return this.#allow.some(
      (e) => e.kind === 'cidr' && e.range[0].kind() === parsed.kind() && parsed.match(e.range),
    )
  }
}

/** A URL's host as the rules see it: lower case, no brackets around IPv6, no trailing dot. */
function hostOf(hostname: string): string {
  return hostname
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
}
