/**
 * What an orchestrator runs around a Kasm session's life, against the gateway's admin API. Shipped in the
 * image as deploy/kasm/register-session.mjs.
 *
 *   node deploy/kasm/register-session.mjs            launch a session through the gateway, or register one
 *   node deploy/kasm/register-session.mjs --remove   unregister it (a gateway with Kasm's API does this itself)
 *
 * Three ways, chosen by what is set:
 *   - KASM_ID set: register that existing session (or rotate its token): PUT /admin/sessions/<KASM_ID>
 *     with the token you gave it (MESSAGING_TOKEN or MESSAGING_TOKEN_FILE).
 *   - KASM_ID not set, KASM_API_URL not set: launch through the gateway (POST /admin/sessions): the gateway,
 *     configured with Kasm's Developer API, mints the token, asks Kasm for the session and registers it.
 *   - KASM_ID not set, KASM_API_URL set (the orchestrator has Kasm API access and the gateway has not): this
 *     script asks Kasm for the session itself (request_kasm) with a fresh token in its environment, then
 *     registers it with `lifecycle: "kasm"`.
 *
 * Environment (secrets come from the environment or a file, never from argv, which `ps` shows):
 *   GATEWAY_URL            the gateway's admin base URL inside the cluster, e.g. http://kasm-runtime-gateway.kasm.svc
 *                          (with GATEWAY_BASE_PATH, include it: http://…svc/gateway/)
 *   SESSION_TEAM           the team whose operators may see the session
 *   KASM_ID                the Kasm session id, when registering an existing session (and for --remove)
 *   SESSION_UPSTREAM       the runtime's base URL as the gateway reaches it, ending with `/`; omit it when the
 *                          gateway builds it (GATEWAY_UPSTREAM_TEMPLATE, or Kasm's answers when it launches)
 *   SESSION_LIFECYCLE      `kasm`: a gateway with Kasm's API removes the session when Kasm no longer has it;
 *                          default `manual` (only flagged stale)
 *   MESSAGING_TOKEN        the session's KASM_RUNTIME_INBOX_TOKEN (or MESSAGING_TOKEN_FILE: a file holding it)
 *   KASM_IMAGE_ID or KASM_IMAGE   the image to launch (Kasm image id, or its name / friendly name)
 *   KASM_USER_ID           optional: the Kasm user the launched session runs as
 *   SESSION_ENVIRONMENT    optional: a JSON object of extra environment variables for the launched session
 *   KASM_API_URL, KASM_API_KEY, KASM_API_KEY_SECRET, KASM_API_AUTH (`body` or `basic`)
 *                          only for the third way: Kasm's Developer API as this script reaches it
 *   GATEWAY_ADMIN_TOKEN    a bearer token with the `admin` role from your identity provider; or, when the gateway
 *                          verifies HS256 tokens, GATEWAY_JWT_SECRET (+ GATEWAY_JWT_ISSUER, GATEWAY_JWT_AUDIENCE,
 *                          GATEWAY_ROLES_CLAIM, GATEWAY_TEAMS_CLAIM) to sign a two-minute admin token here
 *   REGISTER_ATTEMPTS      tries while the gateway is unreachable or answers 5xx, one second apart (default 30)
 *
 * Prints one JSON line: the session's public view from the gateway (never the messaging token; a launch adds
 * Kasm's viewer URL).
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
  return fail('MESSAGING_TOKEN or MESSAGING_TOKEN_FILE is required')
}

/** What to launch: the image, the user, extra environment. */
function launchRequest() {
  const image = env.KASM_IMAGE_ID ? { image_id: env.KASM_IMAGE_ID } : { image: need('KASM_IMAGE') }
  const request = { ...image, team: need('SESSION_TEAM') }
  if (env.KASM_USER_ID) request.user_id = env.KASM_USER_ID
  if (env.SESSION_ENVIRONMENT) {
    try {
      request.environment = JSON.parse(env.SESSION_ENVIRONMENT)
    } catch {
      fail('SESSION_ENVIRONMENT must be a JSON object')
    }
  }
  return request
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

/**
 * Kasm's Developer API: creates the session with the messaging token in its environment. The key and secret
 * go as JSON fields (documented 1.7 to 1.18) or, with KASM_API_AUTH=basic, as HTTP Basic (current reference).
 */
async function requestKasm(token, request) {
  const base = new URL(need('KASM_API_URL'))
  if (base.pathname === '/') base.pathname = '/api/public/'
  if (!base.pathname.endsWith('/')) base.pathname += '/'
  if (!request.image_id) fail('KASM_IMAGE_ID is required when this script asks Kasm itself')
  const headers = { 'content-type': 'application/json' }
  const body = {
    image_id: request.image_id,
    user_id: request.user_id,
    environment: {
      ...request.environment,
      KASM_RUNTIME_OBSERVE_TOKEN_REQUIRED: 'true',
      KASM_RUNTIME_INBOX_TOKEN: token,
    },
  }
  if (env.KASM_API_AUTH === 'basic') {
    const pair = `${need('KASM_API_KEY')}:${need('KASM_API_KEY_SECRET')}`
    headers.authorization = `Basic ${Buffer.from(pair).toString('base64')}`
  } else {
    body.api_key = need('KASM_API_KEY')
    body.api_key_secret = need('KASM_API_KEY_SECRET')
  }
  const response = await fetch(new URL('request_kasm', base), {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(60_000),
  })
  const answer = await response.json().catch(() => ({}))
  // Versions differ: the session comes flat or under `kasm`.
  const kasmId = answer.kasm?.kasm_id ?? answer.kasm_id
  if (!response.ok || answer.error_message || typeof kasmId !== 'string') {
    fail(`request_kasm failed (${response.status}): ${answer.error_message ?? 'no kasm_id in the answer'}`)
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
} else if (!env.KASM_ID && !env.KASM_API_URL) {
  // Launch through the gateway: it mints the token and asks Kasm; the token never passes through here.
  const response = await send('POST', new URL('admin/sessions', withSlash(gateway)), launchRequest())
  const text = await response.text()
  if (response.status === 501)
    fail(
      `launch failed: the gateway has no Kasm API configured; set KASM_ID (register) or KASM_API_URL: ${text}`,
    )
  if (!response.ok) fail(`launch failed: ${response.status} ${text}`)
  process.stdout.write(`${text.trim()}\n`)
} else {
  const team = need('SESSION_TEAM')
  let kasmId = env.KASM_ID
  let token
  let lifecycle = env.SESSION_LIFECYCLE
  if (kasmId) {
    token = messagingToken()
  } else {
    token = randomBytes(32).toString('base64url')
    kasmId = await requestKasm(token, launchRequest())
    lifecycle ??= 'kasm'
  }
  const session = { team, messagingToken: token }
  if (env.SESSION_UPSTREAM) session.upstream = env.SESSION_UPSTREAM
  if (lifecycle) session.lifecycle = lifecycle
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
