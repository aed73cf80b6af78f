import { normaliseUpstream, upstreamFromTemplate } from '../sessions/validate.ts'
import type { KasmSession } from './client.ts'

/**
 * Where the gateway reaches a Kasm session's runtime (GATEWAY_KASM_UPSTREAM). deploy/kasm/README.md says which
 * a stock Kasm install offers and what each needs:
 *
 * - `template`: GATEWAY_UPSTREAM_TEMPLATE with `{kasmId}` (a DNS name or proxy route per session);
 * - `status`: GATEWAY_KASM_STATUS_UPSTREAM filled from the session's details in Kasm's answers
 *   (`{container_ip}`, `{hostname}`, `{host}`, `{kasmId}`), known once the session runs;
 * - `zone`: a fixed upstream per Kasm zone (GATEWAY_KASM_ZONE_UPSTREAMS `zone=url`, `{kasmId}` allowed),
 *   chosen by the session's `zone_name`.
 */
export type UpstreamMode = 'template' | 'status' | 'zone'

/** The configured rules. */
export interface UpstreamRules {
  readonly mode: UpstreamMode
  readonly template: string | undefined
  readonly statusTemplate: string
  readonly zones: ReadonlyMap<string, string>
}

/**
 * An upstream, or why there is none: `pending` while Kasm has not reported what the rule needs yet (the
 * session is starting), otherwise a refusal that waiting does not cure.
 */
export type UpstreamResult =
  | { readonly ok: true; readonly url: string }
  | { readonly ok: false; readonly pending: boolean; readonly reason: string }

/** A host name or IPv4 address as Kasm reports it; IPv6 is bracketed. Anything else is refused. */
const HOST = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})$/
const IPV6 = /^[0-9A-Fa-f:]{2,39}$/

/** `zone=url` pairs of GATEWAY_KASM_ZONE_UPSTREAMS. */
export function parseZones(pairs: readonly string[]): Map<string, string> {
  const zones = new Map<string, string>()
  for (const pair of pairs) {
    const at = pair.indexOf('=')
    zones.set(pair.slice(0, at), pair.slice(at + 1))
  }
  return zones
}

/** Whether the rule needs the session's details from Kasm (so a launch waits for them). */
export function needsDetails(rules: UpstreamRules): boolean {
  return rules.mode !== 'template'
}

/** The upstream of the session registered as `kasmId`, from the rules and what Kasm reported of it. */
export function upstreamFor(rules: UpstreamRules, kasmId: string, details?: KasmSession): UpstreamResult {
  if (rules.mode === 'template') {
    const built = upstreamFromTemplate(rules.template, kasmId)
    if (built === undefined)
      return { ok: false, pending: false, reason: 'GATEWAY_UPSTREAM_TEMPLATE is not set' }
    return built.ok
      ? built
      : { ok: false, pending: false, reason: `GATEWAY_UPSTREAM_TEMPLATE ${built.reason}` }
  }
  if (details === undefined)
    return { ok: false, pending: true, reason: 'Kasm has not reported the session yet' }
  if (rules.mode === 'zone') {
    if (details.zoneName === undefined)
      return { ok: false, pending: true, reason: 'Kasm has not reported the zone yet' }
    const url = rules.zones.get(details.zoneName)
    if (url === undefined)
      return {
        ok: false,
        pending: false,
        reason: `zone ${JSON.stringify(details.zoneName.slice(0, 64))} has no upstream in GATEWAY_KASM_ZONE_UPSTREAMS`,
      }
    return checked(url.replaceAll('{kasmId}', kasmId), 'GATEWAY_KASM_ZONE_UPSTREAMS')
  }
  const values: Record<string, string | undefined> = {
    container_ip: details.containerIp,
    hostname: details.hostname,
    host: details.host,
  }
  let url = rules.statusTemplate.replaceAll('{kasmId}', kasmId)
  for (const [field, value] of Object.entries(values)) {
    if (!url.includes(`{${field}}`)) continue
    if (value === undefined) return { ok: false, pending: true, reason: `Kasm has not reported ${field} yet` }
    // Kasm's answers are input like any other: only a plain host or address is put into a URL.
    if (!HOST.test(value) && !IPV6.test(value))
      return {
        ok: false,
        pending: false,
        reason: `Kasm reported a ${field} that is not a host name or address`,
      }
    url = url.replaceAll(`{${field}}`, IPV6.test(value) && value.includes(':') ? `[${value}]` : value)
  }
  return checked(url, 'GATEWAY_KASM_STATUS_UPSTREAM')
}

function checked(url: string, variable: string): UpstreamResult {
  const result = normaliseUpstream(url)
  return result.ok
    ? result
    : { ok: false, pending: false, reason: `${variable} gives an upstream that ${result.reason}` }
}
