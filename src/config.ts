import { readFileSync } from 'node:fs'
import ipaddr from 'ipaddr.js'
import { z } from 'zod'
import { parseAllowList } from './upstream/url-policy.ts'

/**
 * Every environment variable the gateway reads, in one schema, parsed once at boot.
 *
 * The README's configuration table, the Helm chart's values and `test/deploy` are checked against
 * {@link configVariables}; add a variable here and the chart test tells you where else it belongs.
 */

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
  .transform((v) => v === 'true' || v === '1' || v === 'yes')

const list = z.string().transform((v) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0),
)

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max)

/** One entry of GATEWAY_TRUST_PROXY as Fastify's proxy-addr takes it: an address, a CIDR or a named range. */
function isProxyAddress(entry: string): boolean {
  if (entry === 'loopback' || entry === 'linklocal' || entry === 'uniquelocal') return true
  if (ipaddr.isValid(entry)) return true
  try {
    ipaddr.parseCIDR(entry)
    return true
  } catch {
    return false
  }
}

const origin = z
  .string()
  .url()
  .transform((v) => new URL(v).origin)

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: int(0, 65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional(),

  GATEWAY_SESSIONS_FILE: z.string().min(1).optional(),
  GATEWAY_UPSTREAM_TEMPLATE: z
    .string()
    .regex(/^https?:\/\/.*\{kasmId\}/, 'must be an http(s) URL containing {kasmId}')
    .optional(),
  GATEWAY_DEMO: z.enum(['auto', 'on', 'off']).default('auto'),

  GATEWAY_JWT_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  GATEWAY_JWKS_URL: z.string().url().optional(),
  GATEWAY_JWT_ISSUER: z.string().min(1).optional(),
  GATEWAY_JWT_AUDIENCE: z.string().min(1).optional(),
  GATEWAY_JWT_ALGORITHMS: list.default('RS256,ES256,EdDSA'),
  GATEWAY_JWT_CLOCK_TOLERANCE_S: int(0, 300).default(30),
  GATEWAY_ROLES_CLAIM: z.string().min(1).default('roles'),
  GATEWAY_TEAMS_CLAIM: z.string().min(1).default('teams'),

  GATEWAY_COOKIE_SECRET: list
    .optional()
    .refine((v) => v === undefined || v.every((s) => s.length >= 32), 'each secret must be 32+ characters'),
  GATEWAY_COOKIE_TTL_S: int(60).default(8 * 3600),
  GATEWAY_COOKIE_IDLE_S: int(60).default(30 * 60),
  GATEWAY_PUBLIC_ORIGIN: origin.optional(),
  GATEWAY_ALLOWED_ORIGINS: list.pipe(z.array(origin)).default(''),
  GATEWAY_BASE_PATH: z
    .string()
    .regex(
      /^\/(?:[A-Za-z0-9._~-]+\/)*$/,
      'must start and end with / and hold only letters, digits, ".", "_", "~", "-" between (e.g. /gateway/)',
    )
    .refine(
      (v) => !/^\/(?:desktop|healthz|readyz|metrics)\//.test(v),
      'must not start with /desktop/, /healthz/, /readyz/ or /metrics/ (those paths are not under the base)',
    )
    .default('/'),
  GATEWAY_TRUST_PROXY: z
    .string()
    .refine(
      (v) => v === 'true' || v === 'false' || v.split(',').every((entry) => isProxyAddress(entry.trim())),
      'must be true, false, or a comma list of proxy addresses, CIDRs or loopback/linklocal/uniquelocal',
    )
    .default('false'),

  GATEWAY_UPSTREAM_ALLOW: list
    .superRefine((entries, ctx) => {
      try {
        parseAllowList(entries)
      } catch (err) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: (err as Error).message })
      }
    })
    .default(''),
  GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS: int(100).default(5000),
  GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS: int(100).default(15000),
  GATEWAY_UPSTREAM_CONNECTIONS: int(1).default(64),
  GATEWAY_MAX_JSON_BYTES: int(1024).default(64 * 1024),
  GATEWAY_MAX_ATTACHMENT_BYTES: int(1024).default(8 * 1024 * 1024),
  GATEWAY_EXTRA_READ_ROUTES: list.default(''),
  GATEWAY_RATE_LIMIT_MAX: int(1).default(600),
  GATEWAY_RATE_LIMIT_WINDOW_MS: int(1000).default(60_000),
  GATEWAY_AUDIT_RECORDS: int(1).default(10_000),

  GATEWAY_EVENT_BUFFER: int(16).default(4096),
  GATEWAY_EVENT_MAX_BYTES: int(1024).default(2 * 1024 * 1024),
  GATEWAY_EVENT_BUFFER_BYTES: int(4096).default(16 * 1024 * 1024),
  GATEWAY_EVENT_BUFFER_TOTAL_BYTES: int(4096).default(128 * 1024 * 1024),
  GATEWAY_VIEWER_MAX_QUEUED_BYTES: int(1024).default(1024 * 1024),
  GATEWAY_MAX_STREAMS_PER_OPERATOR: int(1).default(50),
  GATEWAY_STREAM_LINGER_MS: int(0).default(30_000),
  GATEWAY_STREAM_EAGER: bool.default('false'),
  GATEWAY_STREAM_AUTH_RECHECK_MS: int(1000, 60_000).default(60_000),
  GATEWAY_PING_INTERVAL_MS: int(100).default(15_000),
  GATEWAY_UPSTREAM_IDLE_TIMEOUT_MS: int(100).default(45_000),
  GATEWAY_CLOSED_POLL_MS: int(100).default(10_000),

  GATEWAY_ENCRYPTION_KEY: z
    .string()
    .regex(
      /^[A-Za-z0-9_-]{43}$/,
      'must be 32 bytes, base64url (openssl rand -base64 32 | tr "+/" "-_" | tr -d =)',
    )
    .optional(),
  GATEWAY_LEASE_MS: int(1000).default(5000),
  GATEWAY_SHUTDOWN_GRACE_MS: int(0).default(30_000),
  GATEWAY_OVERLOAD_LOOP_DELAY_MS: int(0).default(1000),
  GATEWAY_OVERLOAD_HEAP_USED_BYTES: int(0).optional(),
  GATEWAY_REDIS_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9:_.-]{1,64}$/, 'letters, digits, `:`, `_`, `.`, `-` (e.g. krg: or prod:krg:)')
    .default('krg:'),
  GATEWAY_REDIS_COMMAND_TIMEOUT_MS: int(100, 60_000).default(2000),
  GATEWAY_JWKS_TIMEOUT_MS: int(100, 60_000).default(5000),
  GATEWAY_PRESENCE_TTL_MS: int(1000).default(15_000),
  // Multiplies the upstream event reader's fixed delays (1.5 s poll while the runtime answers 502, 1-2-4..10 s
  // backoff after a dropped stream, 30 s retry after a refused token); tests shorten them with e.g. 0.02.
  GATEWAY_UPSTREAM_RETRY_SCALE: z.coerce.number().min(0.001).max(100).default(1),
})

/** The raw, validated environment. */
export type Env = z.infer<typeof envSchema>

/** Names of every environment variable the gateway reads (for docs and chart checks). */
export const configVariables: readonly string[] = Object.keys(envSchema.shape)

/**
 * Secret variables that may instead be read from a file named by `<NAME>_FILE` (a mounted Kubernetes or
 * Docker secret), so the value never sits in the process environment. Add a secret here when you add one.
 */
export const secretFileVariables: readonly string[] = [
  'REDIS_URL',
  'GATEWAY_JWT_SECRET',
  'GATEWAY_COOKIE_SECRET',
  'GATEWAY_ENCRYPTION_KEY',
]

/** Validated gateway configuration, derived from {@link Env}. */
export interface Config {
  readonly env: Env
  readonly production: boolean
  readonly demo: boolean
  readonly cookieSecure: boolean
  readonly cookieName: string
  /**
   * GATEWAY_BASE_PATH: where the gateway's own routes (console, `auth/`, `admin/`, console APIs) live, with a
   * leading and trailing `/`. The v1 routes stay at `/desktop/<kasm_id>/mcp/`, probes at the root.
   */
  readonly basePath: string
  /** The Fastify `prefix` for the gateway's own route plugins: {@link basePath} without its trailing `/`. */
  readonly routePrefix: string
}

/** Thrown at boot when a variable is wrong; its message names every bad variable. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError'
}

/**
 * Fills `raw` from `<NAME>_FILE` for each of {@link secretFileVariables}: the file's content with one trailing
 * newline removed (what `echo` or `kubectl create secret --from-file` leaves). Setting both is refused, as is a
 * file that cannot be read or is empty; the message names the variable, never the content.
 */
function readSecretFiles(source: NodeJS.ProcessEnv, raw: Record<string, string>): void {
  const bad: string[] = []
  for (const name of secretFileVariables) {
    const path = source[`${name}_FILE`]
    if (path === undefined || path === '') continue
    if (raw[name] !== undefined) {
      bad.push(`${name}_FILE: set either ${name} or ${name}_FILE, not both`)
      continue
    }
    try {
      const value = readFileSync(path, 'utf8').replace(/\r?\n$/, '')
      if (value === '') bad.push(`${name}_FILE: ${path} is empty`)
      else raw[name] = value
    } catch (err) {
      bad.push(`${name}_FILE: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
    }
  }
  if (bad.length > 0) throw new ConfigError(`invalid configuration: ${bad.join('; ')}`)
}

/**
 * Parses and validates the environment once. Throws {@link ConfigError} naming the bad variables.
 * Empty strings count as unset so that `FOO=` in a compose file means the default.
 */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): Config {
  const raw: Record<string, string> = {}
  for (const key of configVariables) {
    const value = source[key]
    if (value !== undefined && value !== '') raw[key] = value
  }
  readSecretFiles(source, raw)
  const parsed = envSchema.safeParse(raw)
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`)
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`)
  }
  const env = parsed.data
  const production = env.NODE_ENV === 'production'
  const cross: string[] = []
  if (env.GATEWAY_JWKS_URL && !env.GATEWAY_JWT_ISSUER)
    cross.push('GATEWAY_JWT_ISSUER: required with GATEWAY_JWKS_URL')
  if (env.GATEWAY_JWKS_URL && !env.GATEWAY_JWT_AUDIENCE)
    cross.push('GATEWAY_JWT_AUDIENCE: required with GATEWAY_JWKS_URL')
  if (production && !env.GATEWAY_COOKIE_SECRET) cross.push('GATEWAY_COOKIE_SECRET: required in production')
  if (production && !env.GATEWAY_JWT_SECRET && !env.GATEWAY_JWKS_URL)
    cross.push('GATEWAY_JWT_SECRET or GATEWAY_JWKS_URL: one is required in production')
  if (env.REDIS_URL && !env.GATEWAY_ENCRYPTION_KEY)
    cross.push('GATEWAY_ENCRYPTION_KEY: required with REDIS_URL (messaging tokens are stored encrypted)')
  // A stored event costs its payload and its frame: a session's budget must hold at least one of the largest.
  if (env.GATEWAY_EVENT_BUFFER_BYTES < 2 * env.GATEWAY_EVENT_MAX_BYTES)
    cross.push('GATEWAY_EVENT_BUFFER_BYTES: must be at least twice GATEWAY_EVENT_MAX_BYTES')
  if (env.GATEWAY_EVENT_BUFFER_TOTAL_BYTES < env.GATEWAY_EVENT_BUFFER_BYTES)
    cross.push('GATEWAY_EVENT_BUFFER_TOTAL_BYTES: must be at least GATEWAY_EVENT_BUFFER_BYTES')
  if (env.GATEWAY_DEMO === 'on' && (production || env.GATEWAY_SESSIONS_FILE))
    cross.push('GATEWAY_DEMO: cannot be on in production or with GATEWAY_SESSIONS_FILE')
  if (cross.length > 0) throw new ConfigError(`invalid configuration: ${cross.join('; ')}`)

  const demo =
    env.GATEWAY_DEMO === 'on' || (env.GATEWAY_DEMO === 'auto' && !production && !env.GATEWAY_SESSIONS_FILE)
  const cookieSecure = env.GATEWAY_PUBLIC_ORIGIN?.startsWith('https:') ?? production
  return {
    env,
    production,
    demo,
    cookieSecure,
    // The __Host- prefix makes browsers refuse the cookie unless Secure, Path=/ and no Domain: only over HTTPS.
    cookieName: cookieSecure ? '__Host-krg_session' : 'krg_session',
    basePath: env.GATEWAY_BASE_PATH,
    routePrefix: env.GATEWAY_BASE_PATH.slice(0, -1),
  }
}
