/**
 * What an orchestrator does right after it asks Kasm for a session: register the session, the team that may
 * see it and its messaging token with the gateway's admin API, so operators can follow it at
 * /desktop/<kasm_id>/mcp/ through the gateway. Shipped in the image as deploy/kasm/register-session.mjs.
 *
 *   node deploy/kasm/register-session.mjs            register (or rotate the token of) a session
 *   node deploy/kasm/register-session.mjs --remove   unregister it when the Kasm session is destroyed
 *
 * Environment (secrets come from the environment or a file, never from argv, which `ps` shows):
 *   GATEWAY_URL            the gateway's base URL inside the cluster, e.g. http://kasm-runtime-gateway.kasm.svc
 *   KASM_ID                the Kasm session id (not needed when KASM_API_URL requests the session here)
 *   SESSION_TEAM           the team whose operators may see the session
 *   SESSION_UPSTREAM       the runtime's base URL as the gateway reaches it, ending with `/`; omit it when the
 *                          gateway builds it from GATEWAY_UPSTREAM_TEMPLATE
 *   MESSAGING_TOKEN        the session's KASM_RUNTIME_INBOX_TOKEN (or MESSAGING_TOKEN_FILE: a file holding it);
 *                          generated here when KASM_API_URL requests the session
 *   GATEWAY_ADMIN_TOKEN    a bearer token with the `admin` role from your identity provider; or, when the gateway
 *                          verifies HS256 tokens, GATEWAY_JWT_SECRET (+ GATEWAY_JWT_ISSUER, GATEWAY_JWT_AUDIENCE,
 *                          GATEWAY_ROLES_CLAIM, GATEWAY_TEAMS_CLAIM) to sign a two-minute admin token here
 *   KASM_API_URL, KASM_API_KEY, KASM_API_KEY_SECRET, KASM_IMAGE_ID, KASM_USER_ID
 *                          optional: request the Kasm session first (Developer API `request_kasm`), passing the
 *                          messaging token into the session's environment
 *   REGISTER_ATTEMPTS      tries while the gateway is unreachable or answers 5xx, one second apart (default 30)
 *
 * Prints one JSON line: the session's public view from the gateway (never the token).
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { SignJWT } from 'jose'

const env = process.env
const remove = process.argv.includes('--remove')

function need(name) {
  const value = env[name]
  if (value === undefined || value === '') fail(`${name} is required`)
  return value
}

function fail(message) {
  process.stderr.write(`register-session: ${message}\n`)
  process.exit(2)
}

function messagingToken() {
  if (env.MESSAGING_TOKEN) return env.MESSAGING_TOKEN
  if (env.MESSAGING_TOKEN_FILE) return readFileSync(env.MESSAGING_TOKEN_FILE, 'utf8').trim()
  if (env.KASM_API_URL) return randomBytes(32).toString('base64url')
  return fail('MESSAGING_TOKEN or MESSAGING_TOKEN_FILE is required')
}

async function adminToken() {
  if (env.GATEWAY_ADMIN_TOKEN) return env.GATEWAY_ADMIN_TOKEN
  if (!env.GATEWAY_JWT_SECRET) return fail('GATEWAY_ADMIN_TOKEN or GATEWAY_JWT_SECRET is required')
  let jwt = new SignJWT({
    [env.GATEWAY_ROLES_CLAIM || 'roles']: ['admin'],
    [env.GATEWAY_TEAMS_CLAIM || 'teams']: ['*'],
  })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(env.ADMIN_SUBJECT || 'orchestrator')
    .setIssuedAt()
    .setExpirationTime('2m')
  if (env.GATEWAY_JWT_ISSUER) jwt = jwt.setIssuer(env.GATEWAY_JWT_ISSUER)
  if (env.GATEWAY_JWT_AUDIENCE) jwt = jwt.setAudience(env.GATEWAY_JWT_AUDIENCE)
  return jwt.sign(new TextEncoder().encode(env.GATEWAY_JWT_SECRET))
}

/** Kasm's Developer API: creates the session with the messaging token in its environment. */
async function requestKasm(token) {
  const response = await fetch(new URL('/api/public/request_kasm', need('KASM_API_URL')), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      api_key: need('KASM_API_KEY'),
      api_key_secret: need('KASM_API_KEY_SECRET'),
      image_id: need('KASM_IMAGE_ID'),
      user_id: env.KASM_USER_ID || undefined,
      environment: { KASM_RUNTIME_INBOX_TOKEN: token },
    }),
    signal: AbortSignal.timeout(60_000),
  })
  const body = await response.json().catch(() => ({}))
  // Versions differ: the session comes flat or under `kasm`.
  const kasmId = body.kasm?.kasm_id ?? body.kasm_id
  if (!response.ok || typeof kasmId !== 'string') {
    fail(`request_kasm failed (${response.status}): ${body.error_message ?? 'no kasm_id in the answer'}`)
  }
  return kasmId
}

/** Sends one admin request, retrying while the gateway is starting (unreachable or 5xx). */
async function send(method, url, body) {
  const attempts = Number(env.REGISTER_ATTEMPTS || 30)
  for (let attempt = 1; ; attempt++) {
    try {
      const response = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${await adminToken()}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      })
      if (response.status < 500 || attempt >= attempts) return response
      await response.body?.cancel()
    } catch (err) {
      if (attempt >= attempts) fail(`gateway unreachable at ${url.origin}: ${err.cause?.code ?? err.message}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
}

const gateway = need('GATEWAY_URL')
if (remove) {
  const kasmId = need('KASM_ID')
  const response = await send(
    'DELETE',
    new URL(`admin/sessions/${encodeURIComponent(kasmId)}`, withSlash(gateway)),
  )
  if (!response.ok && response.status !== 404)
    fail(`unregister failed: ${response.status} ${await response.text()}`)
  process.stdout.write(`${JSON.stringify({ kasmId, removed: response.ok })}\n`)
} else {
  const team = need('SESSION_TEAM')
  const token = messagingToken()
  const kasmId = env.KASM_API_URL ? await requestKasm(token) : need('KASM_ID')
  const session = { team, messagingToken: token }
  if (env.SESSION_UPSTREAM) session.upstream = env.SESSION_UPSTREAM
  const response = await send(
    'PUT',
    new URL(`admin/sessions/${encodeURIComponent(kasmId)}`, withSlash(gateway)),
    session,
  )
  const text = await response.text()
  // The gateway's error bodies never echo the token; printing them is safe.
  if (!response.ok) fail(`register failed: ${response.status} ${text}`)
  process.stdout.write(`${text.trim()}\n`)
}

function withSlash(base) {
  return base.endsWith('/') ? base : `${base}/`
}
