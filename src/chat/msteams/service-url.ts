import { isLoopbackUrl } from '../../config.ts'

/**
 * The base a connector call may be made on, from an activity's (or the notify file's) `serviceUrl`: only an
 * https URL (http to loopback outside production, for tests) without credentials, query or fragment, that
 * starts with one of GATEWAY_TEAMS_SERVICE_URLS once normalised (`..`, case and default ports resolved by the
 * URL parser, so no spelling escapes the prefix). Null otherwise: the bot's bearer token never goes to an
 * address an activity made up.
 */
export function allowedServiceBase(
  serviceUrl: string,
  allowed: readonly string[],
  production: boolean,
): URL | null {
  let url: URL
  try {
    url = new URL(serviceUrl)
  } catch {
    return null
  }
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') return null
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && !production && isLoopbackUrl(url.href)))
    return null
  if (!url.pathname.endsWith('/')) url.pathname = `${url.pathname}/`
  const href = url.href
  for (const prefix of allowed) {
    const normalised = safeHref(prefix)
    if (normalised !== null && href.startsWith(normalised)) return url
  }
  return null
}

function safeHref(url: string): string | null {
  try {
    return new URL(url).href
  } catch {
    return null
  }
}
