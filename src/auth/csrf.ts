/** Methods that never change state, so never need a cross-site check. */
export const safeMethods: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS'])

/** What the cross-site check looks at. */
export interface CsrfInput {
  method: string
  /** The `Sec-Fetch-Site` header, as sent. */
  secFetchSite: string | undefined
  /** The `Origin` header, as sent. */
  origin: string | undefined
  /** Whether an origin may write with the cookie (GATEWAY_PUBLIC_ORIGIN, GATEWAY_ALLOWED_ORIGINS). */
  originAllowed(origin: string): boolean
}

/**
 * The cross-site rule for writes authenticated by the ambient cookie. Allowed when the browser says
 * `Sec-Fetch-Site: same-origin`, or when `Origin` is an allowed origin (which also admits a same-site or
 * cross-site UI that is listed). Everything else is refused, including a write with neither header: a
 * browser always sends one of them on a write, so their absence is not evidence of safety.
 * Returns why it is refused, or undefined when allowed.
 */
export function csrfRefusal(input: CsrfInput): string | undefined {
  if (safeMethods.has(input.method)) return undefined
  const site = input.secFetchSite?.trim().toLowerCase()
  if (site === 'same-origin') return undefined
  const origin = input.origin?.trim()
  if (origin && origin !== 'null' && input.originAllowed(origin)) return undefined
  if (site) {
    // Echo only the values browsers send, never arbitrary header text.
    const shown = site === 'same-site' || site === 'cross-site' || site === 'none' ? site : 'unrecognised'
    return `Sec-Fetch-Site is ${shown} and the Origin is not an allowed origin`
  }
  if (origin) return 'the Origin is not an allowed origin'
  return 'neither Sec-Fetch-Site nor Origin was sent'
}
