import { readFileSync } from 'node:fs'
import ipaddr from 'ipaddr.js'
import { z } from 'zod'
import { type GroupMap, parseGroupMap } from './auth/group-map.ts'
import { parseAllowList } from './upstream/url-policy.ts'

/**
 * Every environment variable the gateway reads, in one schema, parsed once at boot.
 *
 * docs/configuration.md is generated from this schema and the descriptions of `src/config-docs.ts`
 * (`npm run docs:config`); the Helm chart's values and `test/deploy` are checked against {@link configVariables}.
 * Add a variable here, describe it there, and the tests tell you where else it belongs.
 *
 * The `.describe()` of the shared shapes below (`bool`, `list`, ...) is the type the generated page shows.
 */

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', ''])
  .transform((v) => v === 'true' || v === '1' || v === 'yes')
  .describe('boolean')

const list = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0),
  )
  .describe('comma list')

/** OTLP over HTTP in either encoding; gRPC would need a gRPC stack the gateway does not ship. */
const otlpProtocol = z.enum(['http/protobuf', 'http/json'], {
  errorMap: () => ({ message: 'must be http/protobuf or http/json (grpc is not supported)' }),
})

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max)

const groupMap = z
  .string()
  .transform((v, ctx): GroupMap => {
    try {
      return parseGroupMap(v)
    } catch (err) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: (err as Error).message })
      return z.NEVER
    }
  })
  .describe('group map')

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
  .describe('origin')

/** `host:port`, or `[v6]:port` for IPv6. */
const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/

/** `host:port` (`[v6]:port` for IPv6), comma-separated: the sentinels, or a Redis Cluster's seed nodes. */
const hostPort = (example: string) =>
  z
    .string()
    .regex(HOST_PORT, `each must be host:port (e.g. ${example})`)
    .transform((v) => {
      const at = v.lastIndexOf(':')
      return { host: v.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(v.slice(at + 1)) }
    })
    .refine((v) => v.port >= 1 && v.port <= 65535, 'port must be 1-65535')

const hostPorts = (example: string) =>
  list.pipe(z.array(hostPort(example))).describe('comma list of host:port')

/**
 * GATEWAY_REDIS_CLUSTER_NAT_MAP: JSON `{"<announced host:port>": {"host": ..., "port": ...}}`, ioredis's `natMap`,
 * for a cluster whose nodes announce addresses the gateway cannot reach (behind NAT, or Docker port mappings).
 */
const natMap = z
  .string()
  .transform((v, ctx): unknown => {
    try {
      return JSON.parse(v)
    } catch {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: 'must be JSON: {"10.0.0.1:6379":{"host":"...","port":6379}}',
      })
      return z.NEVER
    }
  })
  .pipe(
    z.record(
      // ioredis looks a node up as `<host>:<port>` as the cluster announces it (IPv6 without brackets).
      z.string().regex(/^\S+:\d{1,5}$/, 'each key must be host:port as the node announces it'),
      z.object({ host: z.string().min(1), port: z.number().int().min(1).max(65535) }).strict(),
    ),
  )
  .describe('JSON')

/** The schema of every variable (docs/configuration.md is generated from it by `npm run docs:config`). */
export const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: int(0, 65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional(),
  // Sentinel instead of one address: `host:port` pairs ([v6]:port for IPv6). REDIS_URL, when also set, gives the
  // master's credentials, database and TLS (its host and port are not used).
  GATEWAY_REDIS_SENTINELS: hostPorts('redis-sentinel:26379').default(''),
  // A Redis Cluster instead: some of its nodes (ioredis learns the rest from CLUSTER SLOTS). REDIS_URL, when also
  // set, gives only credentials and TLS; a Cluster has database 0 only.
  GATEWAY_REDIS_CLUSTER_NODES: hostPorts('redis-node-0:6379').default(''),
  GATEWAY_REDIS_CLUSTER_NAT_MAP: natMap.optional(),
  GATEWAY_REDIS_SENTINEL_MASTER: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits, ".", "_", "-"')
    .default('mymaster'),
  GATEWAY_REDIS_SENTINEL_PASSWORD: z.string().min(1).optional(),

  GATEWAY_SESSIONS_FILE: z.string().min(1).optional(),
  GATEWAY_UPSTREAM_TEMPLATE: z
    .string()
    .regex(/^https?:\/\/.*\{kasmId\}/, 'must be an http(s) URL containing {kasmId}')
    .optional(),
  GATEWAY_DEMO: z.enum(['auto', 'on', 'off']).default('auto'),

  // Kasm's Developer API: launch through the gateway, sync with Kasm's sessions (docs: deploy/kasm/README.md).
  GATEWAY_KASM_API_URL: z
    .string()
    .url()
    .regex(/^https?:\/\//, 'must be an http(s) URL')
    .refine((v) => {
      const url = new URL(v)
      return url.username === '' && url.password === '' && url.search === '' && url.hash === ''
    }, 'must not carry credentials, a query or a fragment (the key and secret are separate variables)')
    .optional(),
  GATEWAY_KASM_API_KEY: z.string().min(1).optional(),
  GATEWAY_KASM_API_SECRET: z.string().min(1).optional(),
  // 1.7 to 1.18 document the key and secret as JSON body fields; the current reference documents HTTP Basic.
  GATEWAY_KASM_API_AUTH: z.enum(['body', 'basic']).default('body'),
  GATEWAY_KASM_API_TIMEOUT_MS: int(1000, 600_000).default(30_000),
  GATEWAY_KASM_SYNC_S: int(0, 86_400).default(30),
  GATEWAY_KASM_UPSTREAM: z.enum(['template', 'status', 'zone']).default('template'),
  GATEWAY_KASM_STATUS_UPSTREAM: z
    .string()
    .regex(
      /^https?:\/\/.*\{(container_ip|hostname|host)\}/,
      'must be an http(s) URL with {container_ip}, {hostname} or {host}',
    )
    .default('http://{container_ip}:9434/'),
  GATEWAY_KASM_ZONE_UPSTREAMS: list
    .pipe(
      z.array(
        z.string().regex(/^[^=\s]+=https?:\/\/\S+$/, 'must be zone=http(s)://… pairs, comma-separated'),
      ),
    )
    .default(''),
  GATEWAY_KASM_LAUNCH_TIMEOUT_S: int(1, 3600).default(120),
  GATEWAY_KASM_SIDEBAR: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be a sidebar name (letters, digits, ".", "_", "-")')
    .optional(),
  GATEWAY_KASM_PUBLIC_URL: origin.optional(),
  // Kasm returns session ids with and without dashes depending on the call and release; /desktop/ paths use one.
  GATEWAY_KASM_ID_FORM: z.enum(['dashed', 'plain']).default('dashed'),
  // Who launched sessions belong to in Kasm: this user for every team, unless the teams file names the team's
  // own; a caller's `user_id` only when the team's entry lists it (src/kasm/teams.ts).
  GATEWAY_KASM_USER_ID: z
    .string()
    .regex(/^[A-Za-z0-9-]{1,64}$/, 'must be a Kasm user id (letters, digits, "-")')
    .optional(),
  GATEWAY_KASM_TEAMS_FILE: z.string().min(1).optional(),

  GATEWAY_JWT_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  GATEWAY_JWKS_URL: z.string().url().optional(),
  GATEWAY_JWT_ISSUER: z.string().min(1).optional(),
  GATEWAY_JWT_AUDIENCE: z.string().min(1).optional(),
  GATEWAY_JWT_ALGORITHMS: list.default('RS256,ES256,EdDSA'),
  GATEWAY_JWT_CLOCK_TOLERANCE_S: int(0, 300).default(30),
  GATEWAY_ROLES_CLAIM: z.string().min(1).default('roles'),
  GATEWAY_TEAMS_CLAIM: z.string().min(1).default('teams'),

  GATEWAY_OIDC_ISSUER: z.string().url().optional(),
  GATEWAY_OIDC_CLIENT_ID: z.string().min(1).optional(),
  GATEWAY_OIDC_CLIENT_SECRET: z.string().min(1).optional(),
  GATEWAY_OIDC_SCOPES: z
    .string()
    .default('openid profile email')
    .refine((v) => v.split(/\s+/).includes('openid'), 'must include openid (space-separated scopes)'),
  GATEWAY_OIDC_REDIRECT_URI: z.string().url().optional(),
  GATEWAY_OIDC_GROUPS_CLAIM: z.string().min(1).default('groups'),
  GATEWAY_OIDC_GROUP_MAP: groupMap.default(''),
  GATEWAY_OIDC_REFRESH_S: int(1, 86_400).default(300),
  GATEWAY_OIDC_TIMEOUT_MS: int(100, 60_000).default(5000),

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
  // Requests without a credential per client address per GATEWAY_RATE_LIMIT_WINDOW_MS, before anything else
  // looks at them (src/http/anonymous-limit.ts); 0: no limit.
  GATEWAY_ANONYMOUS_RATE_LIMIT_MAX: int(0).default(300),
  GATEWAY_SIGNIN_FAILURES_MAX: int(1).default(20),
  GATEWAY_SIGNIN_FAILURES_WINDOW_MS: int(1000).default(300_000),
  GATEWAY_AUDIT_RECORDS: int(1).default(10_000),
  // Records of refused and anonymous requests, kept apart so that they never push out the ones above.
  GATEWAY_AUDIT_REFUSED_RECORDS: int(1).default(2_000),
  // The team report (src/report): how long its records (one per closed question or ended handoff) are kept.
  GATEWAY_REPORT_RETENTION_DAYS: int(1, 400).default(30),

  // Attention routing (src/notify): webhooks for every team, per-team ones in GATEWAY_NOTIFY_FILE. The URLs are
  // secret (a Slack webhook's path is its key): never logged, only their hosts.
  GATEWAY_NOTIFY_URL: list
    .pipe(
      z.array(
        z
          .string()
          .url('each must be an absolute http(s) URL')
          .regex(/^https?:\/\//, 'each must be an http(s) URL'),
      ),
    )
    .default(''),
  GATEWAY_NOTIFY_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  GATEWAY_NOTIFY_FORMAT: z.enum(['json', 'slack']).default('json'),
  GATEWAY_NOTIFY_FILE: z.string().min(1).optional(),
  GATEWAY_NOTIFY_TIMEOUT_MS: int(100, 120_000).default(10_000),
  GATEWAY_NOTIFY_RETRY_MS: int(10, 600_000).default(2000),
  GATEWAY_NOTIFY_RETRY_FOR_S: int(0, 86_400).default(600),
  // "I'm on it" lapses after this long without an answer, and the question's escalation steps go on.
  GATEWAY_CLAIM_TTL_S: int(1, 86_400).default(90),

  // The Slack app (src/chat/slack): its message in each team's channel (GATEWAY_NOTIFY_FILE), answers from
  // Slack through the Request URL (signing secret) and/or Socket Mode (app token), linked accounts.
  GATEWAY_SLACK_BOT_TOKEN: z
    .string()
    .regex(/^xoxb-[A-Za-z0-9-]+$/, 'must be a bot token (xoxb-…)')
    .optional(),
  GATEWAY_SLACK_SIGNING_SECRET: z
    .string()
    .regex(/^[A-Za-z0-9]{16,128}$/, "must be the app's signing secret (letters and digits)")
    .optional(),
  GATEWAY_SLACK_APP_TOKEN: z
    .string()
    .regex(/^xapp-[A-Za-z0-9-]+$/, 'must be an app-level token with connections:write (xapp-…)')
    .optional(),
  GATEWAY_SLACK_API_URL: z
    .string()
    .url()
    .regex(/^https?:\/\/.*\/$/, 'must be an http(s) URL ending with / (e.g. https://slack.com/api/)')
    .default('https://slack.com/api/'),
  GATEWAY_SLACK_CLIENT_ID: z
    .string()
    .regex(/^[0-9.]{3,64}$/, "must be the app's client id (digits and dots)")
    .optional(),
  GATEWAY_SLACK_CLIENT_SECRET: z
    .string()
    .regex(/^[A-Za-z0-9]{16,128}$/, "must be the app's client secret")
    .optional(),
  GATEWAY_SLACK_OIDC_ISSUER: z.string().url().default('https://slack.com'),
  GATEWAY_SLACK_LINK_TTL_S: int(60, 366 * 86_400).default(30 * 86_400),

  // The Microsoft Teams bot (src/chat/msteams): a single-tenant Azure Bot (app id, client secret, tenant), its
  // messaging endpoint `<base>teams/messages`; sovereign clouds and tests point the three URLs elsewhere.
  GATEWAY_TEAMS_APP_ID: z
    .string()
    .regex(
      /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
      "must be the bot's Microsoft App ID (a GUID)",
    )
    .optional(),
  GATEWAY_TEAMS_APP_PASSWORD: z.string().min(1).max(1024).optional(),
  GATEWAY_TEAMS_TENANT_ID: z
    .string()
    .regex(
      /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/,
      'must be the Entra tenant id (a GUID)',
    )
    .optional(),
  GATEWAY_TEAMS_OPENID_URL: z
    .string()
    .url()
    .regex(/^https?:\/\//, 'must be an http(s) URL')
    .default('https://login.botframework.com/v1/.well-known/openidconfiguration'),
  GATEWAY_TEAMS_LOGIN_URL: z
    .string()
    .url()
    .regex(/^https?:\/\/[^/?#]+\/?$/, 'must be an http(s) origin (e.g. https://login.microsoftonline.com)')
    .transform((v) => v.replace(/\/$/, ''))
    .default('https://login.microsoftonline.com'),
  GATEWAY_TEAMS_SERVICE_URLS: list
    .pipe(
      z.array(
        z
          .string()
          .url('each must be an absolute http(s) URL')
          .regex(/^https?:\/\/[^/?#]+\/[^?#]*$/, 'each must be an http(s) URL with a path ending in /')
          .regex(/\/$/, 'each must end with /'),
      ),
    )
    .default(
      [
        'https://smba.trafficmanager.net/',
        'https://smba.infra.gcc.teams.microsoft.com/',
        'https://smba.infra.gov.teams.microsoft.us/',
        'https://smba.infra.dod.teams.microsoft.us/',
      ].join(','),
    ),
  GATEWAY_TEAMS_ENTRA_ISSUER: z.string().url().optional(),

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
  // `off` leaves a stream's socket to node:http (more memory per viewer): a way out should the takeover misbehave.
  GATEWAY_SOCKET_TAKEOVER: z.enum(['on', 'off']).default('on'),
  GATEWAY_UPSTREAM_IDLE_TIMEOUT_MS: int(100).default(45_000),
  GATEWAY_CLOSED_POLL_MS: int(100).default(10_000),

  // Comma list: the first key seals, every key opens (rotation: `new,old`, see docs/cluster.md).
  GATEWAY_ENCRYPTION_KEY: list
    .pipe(
      z
        .array(
          z
            .string()
            .regex(
              /^[A-Za-z0-9_-]{43}$/,
              'must be 32 bytes, base64url (openssl rand -base64 32 | tr "+/" "-_" | tr -d =)',
            ),
        )
        .min(1, 'must name at least one key')
        .refine((keys) => new Set(keys).size === keys.length, 'lists the same key twice'),
    )
    .optional(),
  GATEWAY_RESEAL_PER_S: int(1, 10_000).default(50),
  GATEWAY_LEASE_MS: int(1000).default(5000),
  GATEWAY_SHUTDOWN_GRACE_MS: int(0).default(30_000),
  GATEWAY_OVERLOAD_LOOP_DELAY_MS: int(0).default(1000),
  GATEWAY_OVERLOAD_HEAP_USED_BYTES: int(0).optional(),
  // Unset: derived at boot from the descriptor limit (http/connection-limits.ts).
  GATEWAY_MAX_CONNECTIONS: int(1).optional(),
  // Unset: a quarter of the connection cap.
  GATEWAY_MAX_HALF_OPEN_CONNECTIONS: int(1).optional(),
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

  // OpenTelemetry tracing (src/tracing), under the standard names: on when an endpoint is set. The SDK reads
  // the other OTEL_* variables itself (headers, timeouts, sampler, batch sizes); these decide whether it loads.
  OTEL_SDK_DISABLED: bool.default('false'),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.string().url().optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.string().url().optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol.optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol.optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default('kasm-runtime-gateway'),
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
  'GATEWAY_REDIS_SENTINEL_PASSWORD',
  'GATEWAY_JWT_SECRET',
  'GATEWAY_COOKIE_SECRET',
  'GATEWAY_ENCRYPTION_KEY',
  'GATEWAY_KASM_API_KEY',
  'GATEWAY_KASM_API_SECRET',
  'GATEWAY_OIDC_CLIENT_SECRET',
  'GATEWAY_NOTIFY_URL',
  'GATEWAY_NOTIFY_SECRET',
  'GATEWAY_SLACK_BOT_TOKEN',
  'GATEWAY_SLACK_SIGNING_SECRET',
  'GATEWAY_SLACK_APP_TOKEN',
  'GATEWAY_SLACK_CLIENT_SECRET',
  'GATEWAY_TEAMS_APP_PASSWORD',
]

/**
 * Where cluster mode finds Redis: one address (REDIS_URL), the master of a Sentinel group
 * (GATEWAY_REDIS_SENTINELS), with REDIS_URL's credentials, database and TLS when it is set too, or a Redis
 * Cluster (GATEWAY_REDIS_CLUSTER_NODES), with REDIS_URL's credentials and TLS.
 */
export type RedisEndpoint =
  | { readonly kind: 'url'; readonly url: string }
  | {
      readonly kind: 'sentinel'
      readonly sentinels: readonly { readonly host: string; readonly port: number }[]
      readonly master: string
      readonly sentinelPassword: string | undefined
      readonly url: string | undefined
    }
  | {
      readonly kind: 'cluster'
      /** Seed nodes; ioredis discovers the others (CLUSTER SLOTS) and follows MOVED/ASK. */
      readonly nodes: readonly { readonly host: string; readonly port: number }[]
      /** From REDIS_URL: only these are taken from it (its host, port and path are not used). */
      readonly username: string | undefined
      readonly password: string | undefined
      /** REDIS_URL is `rediss:`. */
      readonly tls: boolean
      /** GATEWAY_REDIS_CLUSTER_NAT_MAP: announced `host:port` -> reachable address. */
      readonly natMap: Readonly<Record<string, { readonly host: string; readonly port: number }>> | undefined
    }

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
  /** Cluster mode's Redis; null when embedded (none of REDIS_URL, GATEWAY_REDIS_SENTINELS, GATEWAY_REDIS_CLUSTER_NODES). */
  readonly redis: RedisEndpoint | null
  /** OpenTelemetry tracing; null when off (no OTLP endpoint, or OTEL_SDK_DISABLED). */
  readonly tracing: TracingConfig | null
}

/** How spans are exported when tracing is on (the SDK reads the endpoint and its other settings itself). */
export interface TracingConfig {
  readonly serviceName: string
  /** The traces protocol: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else protobuf. */
  readonly protocol: 'http/protobuf' | 'http/json'
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

/** GATEWAY_REDIS_CLUSTER_NODES' companions: what a Redis Cluster cannot do, and settings that need it. */
function redisClusterProblems(env: Env): string[] {
  const out: string[] = []
  const on = env.GATEWAY_REDIS_CLUSTER_NODES.length > 0
  if (!on) {
    if (env.GATEWAY_REDIS_CLUSTER_NAT_MAP !== undefined)
      out.push('GATEWAY_REDIS_CLUSTER_NAT_MAP: only with GATEWAY_REDIS_CLUSTER_NODES')
    return out
  }
  if (env.GATEWAY_REDIS_SENTINELS.length > 0)
    out.push(
      'GATEWAY_REDIS_CLUSTER_NODES and GATEWAY_REDIS_SENTINELS: set one of them (a Redis Cluster or Sentinel), not both',
    )
  const url = env.REDIS_URL === undefined ? undefined : parseUrl(env.REDIS_URL)
  if (url === null) out.push('REDIS_URL: not a valid URL')
  else if (url !== undefined) {
    // `redis://host/3` selects database 3; a Redis Cluster has database 0 only (SELECT is refused).
    const db = url.pathname.replace(/^\//, '')
    if (db !== '' && db !== '0')
      out.push(
        `REDIS_URL: database ${db} with GATEWAY_REDIS_CLUSTER_NODES; a Redis Cluster has database 0 only (remove /${db})`,
      )
  }
  return out
}

function parseUrl(value: string): URL | null {
  try {
    return new URL(value)
  } catch {
    return null
  }
}

/** The Redis Cluster endpoint; REDIS_URL, when set, gives the credentials and TLS (checked above). */
function clusterEndpoint(env: Env): RedisEndpoint {
  const url = env.REDIS_URL === undefined ? null : parseUrl(env.REDIS_URL)
  const decoded = (v: string | undefined): string | undefined =>
    v === undefined || v === '' ? undefined : decodeURIComponent(v)
  return {
    kind: 'cluster',
    nodes: env.GATEWAY_REDIS_CLUSTER_NODES,
    username: decoded(url?.username),
    password: decoded(url?.password),
    tls: url?.protocol === 'rediss:',
    natMap: env.GATEWAY_REDIS_CLUSTER_NAT_MAP,
  }
}

/** The sign-in settings that only make sense together. */
function oidcProblems(env: Env, production: boolean): string[] {
  const out: string[] = []
  const issuer = env.GATEWAY_OIDC_ISSUER
  if (issuer === undefined) {
    for (const name of [
      'GATEWAY_OIDC_CLIENT_ID',
      'GATEWAY_OIDC_CLIENT_SECRET',
      'GATEWAY_OIDC_REDIRECT_URI',
    ] as const)
      if (env[name] !== undefined) out.push(`${name}: needs GATEWAY_OIDC_ISSUER`)
    return out
  }
  if (production && !issuer.startsWith('https:')) out.push('GATEWAY_OIDC_ISSUER: must be https in production')
  if (env.GATEWAY_OIDC_CLIENT_ID === undefined)
    out.push('GATEWAY_OIDC_CLIENT_ID: required with GATEWAY_OIDC_ISSUER')
  if (env.GATEWAY_OIDC_CLIENT_SECRET === undefined)
    out.push('GATEWAY_OIDC_CLIENT_SECRET: required with GATEWAY_OIDC_ISSUER (a confidential client)')
  const redirect = env.GATEWAY_OIDC_REDIRECT_URI
  if (redirect === undefined && env.GATEWAY_PUBLIC_ORIGIN === undefined)
    out.push(
      'GATEWAY_OIDC_REDIRECT_URI: required with GATEWAY_OIDC_ISSUER unless GATEWAY_PUBLIC_ORIGIN is set',
    )
  const callback = `${env.GATEWAY_BASE_PATH}auth/callback`
  if (redirect !== undefined && new URL(redirect).pathname !== callback)
    out.push(`GATEWAY_OIDC_REDIRECT_URI: its path must be ${callback}, where the gateway serves the callback`)
  return out
}

/** The Slack app's settings that only make sense together. */
function slackProblems(env: Env, production: boolean): string[] {
  const out: string[] = []
  if (env.GATEWAY_SLACK_BOT_TOKEN === undefined) {
    for (const name of [
      'GATEWAY_SLACK_SIGNING_SECRET',
      'GATEWAY_SLACK_APP_TOKEN',
      'GATEWAY_SLACK_CLIENT_ID',
      'GATEWAY_SLACK_CLIENT_SECRET',
    ] as const)
      if (env[name] !== undefined) out.push(`${name}: needs GATEWAY_SLACK_BOT_TOKEN`)
    return out
  }
  // Slack links open the gateway and its buttons open the console: both need an absolute address.
  if (env.GATEWAY_PUBLIC_ORIGIN === undefined)
    out.push('GATEWAY_PUBLIC_ORIGIN: required with GATEWAY_SLACK_BOT_TOKEN (Slack links to the gateway)')
  if ((env.GATEWAY_SLACK_CLIENT_ID === undefined) !== (env.GATEWAY_SLACK_CLIENT_SECRET === undefined))
    out.push(
      'GATEWAY_SLACK_CLIENT_ID and GATEWAY_SLACK_CLIENT_SECRET: set both (Sign in with Slack) or neither',
    )
  if (production && !env.GATEWAY_SLACK_API_URL.startsWith('https:'))
    out.push('GATEWAY_SLACK_API_URL: must be https in production')
  if (production && !env.GATEWAY_SLACK_OIDC_ISSUER.startsWith('https:'))
    out.push('GATEWAY_SLACK_OIDC_ISSUER: must be https in production')
  return out
}

/** The Teams bot's settings that only make sense together, and the addresses its bearer tokens may travel to. */
function teamsProblems(env: Env, production: boolean): string[] {
  const out: string[] = []
  const set = [env.GATEWAY_TEAMS_APP_ID, env.GATEWAY_TEAMS_APP_PASSWORD, env.GATEWAY_TEAMS_TENANT_ID]
  const count = set.filter((v) => v !== undefined).length
  if (count !== 0 && count !== 3)
    out.push(
      'GATEWAY_TEAMS_APP_ID, GATEWAY_TEAMS_APP_PASSWORD and GATEWAY_TEAMS_TENANT_ID: set all three or none',
    )
  if (count === 3 && env.GATEWAY_PUBLIC_ORIGIN === undefined)
    out.push('GATEWAY_PUBLIC_ORIGIN: required with GATEWAY_TEAMS_APP_ID (Teams cards link to the gateway)')
  if (production && !env.GATEWAY_TEAMS_OPENID_URL.startsWith('https:'))
    out.push('GATEWAY_TEAMS_OPENID_URL: must be https in production')
  if (production && !env.GATEWAY_TEAMS_LOGIN_URL.startsWith('https:'))
    out.push('GATEWAY_TEAMS_LOGIN_URL: must be https in production')
  // A bearer token is posted to these: plain http only to this machine, and never in production.
  for (const url of env.GATEWAY_TEAMS_SERVICE_URLS)
    if (url.startsWith('http:') && (production || !isLoopbackUrl(url)))
      out.push(`GATEWAY_TEAMS_SERVICE_URLS: ${url} must be https (http only on loopback, outside production)`)
  return out
}

/** The URL's host is a loopback address or `localhost`. */
export function isLoopbackUrl(url: string): boolean {
  let host: string
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, '')
  } catch {
    return false
  }
  if (host === 'localhost') return true
  return ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback'
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
  const sentinel = env.GATEWAY_REDIS_SENTINELS.length > 0
  const redisCluster = env.GATEWAY_REDIS_CLUSTER_NODES.length > 0
  if ((env.REDIS_URL || sentinel || redisCluster) && !env.GATEWAY_ENCRYPTION_KEY)
    cross.push(
      'GATEWAY_ENCRYPTION_KEY: required with REDIS_URL, GATEWAY_REDIS_SENTINELS or GATEWAY_REDIS_CLUSTER_NODES (messaging tokens are stored encrypted)',
    )
  if (env.GATEWAY_REDIS_SENTINEL_PASSWORD && !sentinel)
    cross.push('GATEWAY_REDIS_SENTINEL_PASSWORD: only with GATEWAY_REDIS_SENTINELS')
  cross.push(...redisClusterProblems(env))
  if (env.GATEWAY_KASM_API_URL && !(env.GATEWAY_KASM_API_KEY && env.GATEWAY_KASM_API_SECRET))
    cross.push('GATEWAY_KASM_API_KEY and GATEWAY_KASM_API_SECRET: required with GATEWAY_KASM_API_URL')
  if (env.GATEWAY_KASM_API_URL && env.GATEWAY_KASM_UPSTREAM === 'template' && !env.GATEWAY_UPSTREAM_TEMPLATE)
    cross.push(
      'GATEWAY_UPSTREAM_TEMPLATE: required with GATEWAY_KASM_UPSTREAM=template (or set GATEWAY_KASM_UPSTREAM to status or zone)',
    )
  if (env.GATEWAY_KASM_UPSTREAM === 'zone' && env.GATEWAY_KASM_ZONE_UPSTREAMS.length === 0)
    cross.push('GATEWAY_KASM_ZONE_UPSTREAMS: required with GATEWAY_KASM_UPSTREAM=zone')
  cross.push(...oidcProblems(env, production))
  cross.push(...slackProblems(env, production))
  cross.push(...teamsProblems(env, production))
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
    tracing:
      (env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) && !env.OTEL_SDK_DISABLED
        ? {
            serviceName: env.OTEL_SERVICE_NAME,
            protocol:
              env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
          }
        : null,
    redis: redisCluster
      ? clusterEndpoint(env)
      : sentinel
        ? {
            kind: 'sentinel',
            sentinels: env.GATEWAY_REDIS_SENTINELS,
            master: env.GATEWAY_REDIS_SENTINEL_MASTER,
            sentinelPassword: env.GATEWAY_REDIS_SENTINEL_PASSWORD,
            url: env.REDIS_URL,
          }
        : env.REDIS_URL
          ? { kind: 'url', url: env.REDIS_URL }
          : null,
  }
}
