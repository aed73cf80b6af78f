// Apart from the connector, which loads Microsoft's SDK: the modules that handle this error load without it.

/**
 * A connector call that failed for good. `code`: `service_url_refused` (not in GATEWAY_TEAMS_SERVICE_URLS: no
 * request was made), `token` (no token of our own), `unreachable`, `http_<status>`, `bad_response`.
 */
export class TeamsApiError extends Error {
  override readonly name = 'TeamsApiError'
  readonly code: string
  readonly status: number
  constructor(code: string, status: number, options?: ErrorOptions) {
    super(`Teams connector: ${code}`, options)
    this.code = code
    this.status = status
  }
}
