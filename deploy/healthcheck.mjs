/**
 * Container health check: exits 0 when the gateway answers `GET <path>` (default /healthz) with 2xx, 1 otherwise.
 * Runs with the image's own node, so the image needs no curl. `node deploy/healthcheck.mjs /readyz` asks readiness.
 */
const path = process.argv[2] ?? '/healthz'
const port = process.env.PORT || '8080'
const bound = process.env.HOST ?? ''
// A wildcard bind answers on loopback; a specific address must be asked directly.
const host = bound === '' || bound === '0.0.0.0' || bound === '::' ? '127.0.0.1' : bound
const authority = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`

try {
  const response = await fetch(`http://${authority}${path}`, { signal: AbortSignal.timeout(2500) })
  await response.body?.cancel()
  process.exit(response.ok ? 0 : 1)
} catch {
  process.exit(1)
}
