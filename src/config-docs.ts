import type { Env } from './config.ts'

/**
 * What each configuration variable of `src/config.ts` is for, in words: the one source of the descriptions in
 * docs/configuration.md (written by `npm run docs:config`, which takes the default, type, allowed values and
 * whether it is secret from the schema itself).
 *
 * Kept beside the schema rather than as zod `.describe()` calls inside it: a hundred sentences woven into the
 * validators would double the schema's length and bury what each one accepts, and a `.describe()` placed before
 * a `.default()` or `.pipe()` is silently lost. Here the type keys the object by the schema's own variables, so a
 * variable added without a description (or a description left after its variable went) fails `tsc`, and
 * `test/docs/configuration.test.ts` names it.
 */

/** The topics of docs/configuration.md, in the order the page shows them (the values are its headings). */
export const configTopics = {
  server: 'Server',
  credentials: 'Credentials: bearer tokens and cookie sessions',
  signIn: 'Sign-in (OpenID Connect)',
  sessions: 'Sessions and upstreams',
  kasm: "Kasm's Developer API",
  limits: 'Limits',
  events: 'Event streams',
  audit: 'Audit and report',
  notify: 'Notifications (webhooks)',
  slack: 'Slack',
  teams: 'Microsoft Teams',
  cluster: 'Redis and cluster mode',
  tracing: 'Tracing (OpenTelemetry)',
} as const

/** A topic of docs/configuration.md. */
export type ConfigTopic = keyof typeof configTopics

/** One variable's entry: where the page lists it, and what it does (Markdown; links are relative to docs/). */
export interface VariableDoc {
  readonly topic: ConfigTopic
  readonly text: string
}

/** Every variable's description, keyed by the schema's variables (the type makes it complete). */
export const configDocs: { readonly [Name in keyof Env]-?: VariableDoc } = {
  NODE_ENV: { topic: 'server', text: '`production` requires real secrets and never starts the demo' },
  PORT: { topic: 'server', text: 'listen port' },
  HOST: { topic: 'server', text: 'listen address' },
  LOG_LEVEL: { topic: 'server', text: 'the least level logged; audit records are `info`' },
  REDIS_URL: {
    topic: 'cluster',
    text: 'unset: embedded single-process mode; set: cluster mode (see [cluster.md](cluster.md)). With Sentinel or a Redis Cluster it gives only the credentials, database and TLS',
  },
  GATEWAY_REDIS_SENTINELS: {
    topic: 'cluster',
    text: 'cluster mode through Redis Sentinel: the sentinels, comma-separated (`REDIS_URL` then gives only credentials, database, TLS)',
  },
  GATEWAY_REDIS_CLUSTER_NODES: {
    topic: 'cluster',
    text: 'cluster mode on a Redis Cluster: some of its nodes, comma-separated (`REDIS_URL` then gives only credentials and TLS; database 0 only; not with Sentinel)',
  },
  GATEWAY_REDIS_CLUSTER_NAT_MAP: {
    topic: 'cluster',
    text: 'with a Redis Cluster: JSON from the `host:port` its nodes announce to where they are reached, `{"10.0.0.1:6379":{"host":"…","port":6379}}`',
  },
  GATEWAY_REDIS_SENTINEL_MASTER: { topic: 'cluster', text: "the Sentinel master group's name" },
  GATEWAY_REDIS_SENTINEL_PASSWORD: {
    topic: 'cluster',
    text: "the sentinels' own password (`requirepass` on the sentinels), when they have one",
  },
  GATEWAY_SESSIONS_FILE: {
    topic: 'sessions',
    text: 'JSON or YAML [sessions file](sessions.md#the-sessions-file), reloaded on SIGHUP',
  },
  GATEWAY_UPSTREAM_TEMPLATE: {
    topic: 'sessions',
    text: 'upstream of a session registered without one, e.g. `http://kasm-proxy.internal/desktop/{kasmId}/mcp/`',
  },
  GATEWAY_DEMO: {
    topic: 'server',
    text: '`auto`: the [demo](getting-started.md) starts when not in production and no sessions file is set; `on`; `off`',
  },
  GATEWAY_KASM_API_URL: {
    topic: 'kasm',
    text: "Kasm's Developer API (an origin means `/api/public/`): set = [launch and sync](sessions.md#sessions-that-follow-kasm) through the gateway",
  },
  GATEWAY_KASM_API_KEY: {
    topic: 'kasm',
    text: 'the Developer API key; needs User, Users Auth Session, Sessions View, Images View',
  },
  GATEWAY_KASM_API_SECRET: { topic: 'kasm', text: "the API key's secret" },
  GATEWAY_KASM_API_AUTH: {
    topic: 'kasm',
    text: '`body`: key and secret as JSON fields (Kasm 1.7-1.18 docs); `basic`: HTTP Basic (current docs)',
  },
  GATEWAY_KASM_API_TIMEOUT_MS: { topic: 'kasm', text: 'one Developer API call fails after this long' },
  GATEWAY_KASM_SYNC_S: {
    topic: 'kasm',
    text: "how often one replica reconciles the registry with Kasm's sessions; `0`: no sync",
  },
  GATEWAY_KASM_UPSTREAM: {
    topic: 'kasm',
    text: "where launched sessions' runtimes are reached: `template`, `status` or `zone` ([deploy/kasm](../deploy/kasm/README.md#3-upstream-addresses-where-the-gateway-reaches-each-sessions-runtime))",
  },
  GATEWAY_KASM_STATUS_UPSTREAM: {
    topic: 'kasm',
    text: "with `status`: from Kasm's details of the session (`{container_ip}`, `{hostname}`, `{host}`)",
  },
  GATEWAY_KASM_ZONE_UPSTREAMS: {
    topic: 'kasm',
    text: 'with `zone`: `zone=url` pairs, comma-separated (`{kasmId}` allowed in the URL)',
  },
  GATEWAY_KASM_LAUNCH_TIMEOUT_S: {
    topic: 'kasm',
    text: 'how long a launch waits for Kasm to report the address; then the session is destroyed (504)',
  },
  GATEWAY_KASM_SIDEBAR: {
    topic: 'kasm',
    text: '`KASM_RUNTIME_SIDEBAR` of launched sessions: the sidebar the Kasm viewer shows',
  },
  GATEWAY_KASM_PUBLIC_URL: {
    topic: 'kasm',
    text: "where Kasm's viewer links point (the launcher's, and the console's link to take over a handoff); default the API's origin; neither set: the console shows no viewer link",
  },
  GATEWAY_KASM_ID_FORM: {
    topic: 'kasm',
    text: 'the form of Kasm session ids sessions are registered under: `dashed` UUIDs or `plain` hex',
  },
  GATEWAY_KASM_USER_ID: {
    topic: 'kasm',
    text: "the Kasm user launched sessions run as, for teams without their own `kasmUserId`; unset: those teams' launches are refused (501)",
  },
  GATEWAY_KASM_TEAMS_FILE: {
    topic: 'kasm',
    text: 'JSON or YAML per-team launch rules: `kasmUserId`, the `userIds` a team may choose, its `environment` allowlist ([deploy/kasm](../deploy/kasm/README.md#4-launch-sessions-through-the-gateway)); reloaded on SIGHUP',
  },
  GATEWAY_JWT_SECRET: {
    topic: 'credentials',
    text: 'HS256 secret of bearer JWTs; outside production a random one is made when neither this nor a JWKS is set',
  },
  GATEWAY_JWKS_URL: {
    topic: 'credentials',
    text: 'remote JWKS of bearer JWTs (RS256/ES256/EdDSA); needs issuer and audience',
  },
  GATEWAY_JWT_ISSUER: { topic: 'credentials', text: 'required `iss`' },
  GATEWAY_JWT_AUDIENCE: { topic: 'credentials', text: 'required `aud`' },
  GATEWAY_JWT_ALGORITHMS: {
    topic: 'credentials',
    text: 'algorithms accepted from the JWKS (asymmetric only)',
  },
  GATEWAY_JWT_CLOCK_TOLERANCE_S: { topic: 'credentials', text: 'clock skew allowed on `exp`/`nbf`' },
  GATEWAY_ROLES_CLAIM: {
    topic: 'credentials',
    text: 'claim (or dotted path, e.g. `realm_access.roles`) holding the roles, in bearer JWTs and ID tokens',
  },
  GATEWAY_TEAMS_CLAIM: { topic: 'credentials', text: 'claim (or dotted path) holding the teams' },
  GATEWAY_OIDC_ISSUER: {
    topic: 'signIn',
    text: 'your identity provider (OpenID Connect discovery): people [sign in](sign-in.md) at `auth/login`',
  },
  GATEWAY_OIDC_CLIENT_ID: {
    topic: 'signIn',
    text: "the gateway's client id at the IdP (a confidential client: it also needs the secret)",
  },
  GATEWAY_OIDC_CLIENT_SECRET: { topic: 'signIn', text: 'its client secret' },
  GATEWAY_OIDC_SCOPES: {
    topic: 'signIn',
    text: 'scopes asked for, space-separated, `openid` among them; add `offline_access` where the IdP needs it for refresh tokens (Entra, Okta)',
  },
  GATEWAY_OIDC_REDIRECT_URI: {
    topic: 'signIn',
    text: 'default: `GATEWAY_PUBLIC_ORIGIN` + the base path + `auth/callback`; register it at the IdP',
  },
  GATEWAY_OIDC_GROUPS_CLAIM: {
    topic: 'signIn',
    text: 'claim (or dotted path) with the group names that `GATEWAY_OIDC_GROUP_MAP` maps',
  },
  GATEWAY_OIDC_GROUP_MAP: {
    topic: 'signIn',
    text: '`group=role team:<name> …; …`: roles and teams granted by IdP groups (for IdPs that only emit groups)',
  },
  GATEWAY_OIDC_REFRESH_S: {
    topic: 'signIn',
    text: "how often a signed-in person's roles and teams are re-read (refresh token); a refusal signs them out",
  },
  GATEWAY_OIDC_TIMEOUT_MS: {
    topic: 'signIn',
    text: 'each request to the IdP; an IdP slower than this (or down) is a page and 503 `idp_unavailable`',
  },
  GATEWAY_COOKIE_SECRET: {
    topic: 'credentials',
    text: 'comma list of secrets of 32+ characters each: the first signs, all verify (rotation: `new,old`); random outside production when unset',
  },
  GATEWAY_COOKIE_TTL_S: {
    topic: 'credentials',
    text: 'cookie session lifetime (capped at the `exp` of the token it was made from)',
  },
  GATEWAY_COOKIE_IDLE_S: {
    topic: 'credentials',
    text: 'a cookie session unused this long ends (an open event stream counts as use)',
  },
  GATEWAY_PUBLIC_ORIGIN: {
    topic: 'server',
    text: 'the origin people use; `https:` gives a `__Host-` Secure cookie',
  },
  GATEWAY_ALLOWED_ORIGINS: { topic: 'server', text: 'further origins allowed to write with the cookie' },
  GATEWAY_BASE_PATH: {
    topic: 'server',
    text: 'where the console, `auth/` and `admin/` live (e.g. `/gateway/`); `/desktop/<id>/mcp/` and the probes stay at the root',
  },
  GATEWAY_TRUST_PROXY: {
    topic: 'server',
    text: 'Fastify `trustProxy`: `true`, or a comma list of proxy addresses/CIDRs (or `loopback`, `linklocal`, `uniquelocal`)',
  },
  GATEWAY_UPSTREAM_ALLOW: {
    topic: 'sessions',
    text: 'where admin-registered upstreams and webhooks may point: hosts, `*.domain`, addresses, CIDRs (see [the URL policy](security.md#where-the-gateway-connects))',
  },
  GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS: { topic: 'sessions', text: 'connect timeout to a runtime (then 504)' },
  GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS: {
    topic: 'sessions',
    text: "time for a runtime's response headers (then 504); bodies are streams and have no timeout",
  },
  GATEWAY_UPSTREAM_CONNECTIONS: { topic: 'sessions', text: 'keep-alive connections per runtime origin' },
  GATEWAY_MAX_JSON_BYTES: { topic: 'limits', text: 'JSON body limit (413)' },
  GATEWAY_MAX_ATTACHMENT_BYTES: {
    topic: 'limits',
    text: "attachment limit (413), like the runtime's `inbox_attachment_bytes`",
  },
  GATEWAY_EXTRA_READ_ROUTES: {
    topic: 'sessions',
    text: 'comma list of extra read-only routes a newer runtime serves',
  },
  GATEWAY_MAX_CONNECTIONS: {
    topic: 'limits',
    text: "client connections a replica serves; past it 503 `too_many_connections` with `Retry-After` (the health probes and metrics excepted), and 64 past it new connections are dropped unanswered; unset: the process's descriptor limit (its soft limit, read at boot from /proc/self/limits) less a reserve of a tenth of it or 128, whichever is more (for upstreams, Redis and files); 1024 where that limit cannot be read",
  },
  GATEWAY_MAX_HALF_OPEN_CONNECTIONS: {
    topic: 'limits',
    text: 'connections without a whole request (new, or idle between requests) kept open; past it the one waiting longest is closed; unset: a quarter of the connection cap',
  },
  GATEWAY_RATE_LIMIT_MAX: {
    topic: 'limits',
    text: 'requests per operator per window (per IP before sign-in); in cluster mode shared by every replica, each leasing up to a fiftieth of it at a time (so with R replicas up to R × max / 50 may lapse unused)',
  },
  GATEWAY_RATE_LIMIT_WINDOW_MS: { topic: 'limits', text: 'the rate-limit window' },
  GATEWAY_ANONYMOUS_RATE_LIMIT_MAX: {
    topic: 'limits',
    text: 'requests without a credential per client address per window, before any other check; then 429 `anonymous_rate_limited` (shared by every replica in cluster mode); `0`: no limit',
  },
  GATEWAY_SIGNIN_FAILURES_MAX: {
    topic: 'limits',
    text: 'forged or replayed sign-ins per client address per window; then 429 `signin_rate_limited`',
  },
  GATEWAY_SIGNIN_FAILURES_WINDOW_MS: {
    topic: 'limits',
    text: 'that window; the address is per `GATEWAY_TRUST_PROXY`, counted across replicas',
  },
  GATEWAY_AUDIT_RECORDS: {
    topic: 'audit',
    text: 'audit records of authenticated actions kept (memory ring or Redis stream)',
  },
  GATEWAY_AUDIT_REFUSED_RECORDS: {
    topic: 'audit',
    text: 'audit records of refused, aborted and anonymous requests, kept apart so they never push out the records above',
  },
  GATEWAY_REPORT_RETENTION_DAYS: {
    topic: 'audit',
    text: 'days the [team report](console.md#the-team-report) keeps its records (memory, or Redis in cluster mode)',
  },
  GATEWAY_NOTIFY_URL: {
    topic: 'notify',
    text: "webhook URLs notified for every team without a notify-file entry (see [notifications.md](notifications.md)); secret: a Slack URL's path is its key",
  },
  GATEWAY_NOTIFY_SECRET: { topic: 'notify', text: 'HMAC-SHA256 key of `X-Krg-Signature`' },
  GATEWAY_NOTIFY_FORMAT: {
    topic: 'notify',
    text: '`json`, or `slack` for Slack-compatible incoming webhooks',
  },
  GATEWAY_NOTIFY_FILE: {
    topic: 'notify',
    text: 'JSON or YAML [per-team targets](notifications.md#per-team-targets), replacing the global ones for that team; reloaded on SIGHUP',
  },
  GATEWAY_NOTIFY_TIMEOUT_MS: {
    topic: 'notify',
    text: 'one webhook attempt, connect to the end of the answer',
  },
  GATEWAY_NOTIFY_RETRY_MS: {
    topic: 'notify',
    text: "the first retry's delay (5xx, 408, 429, timeout, unreachable); doubling up to 5 min, with jitter",
  },
  GATEWAY_NOTIFY_RETRY_FOR_S: {
    topic: 'notify',
    text: 'no retry starts later than this after the first attempt (the delivery is then `failed`)',
  },
  GATEWAY_CLAIM_TTL_S: {
    topic: 'notify',
    text: 'how long an "I\'m on it" claim on a question holds without an answer: then it lapses, the holder is told and the question\'s escalation steps go on (see [notifications.md](notifications.md#escalation))',
  },
  GATEWAY_SLACK_BOT_TOKEN: {
    topic: 'slack',
    text: "the Slack app's bot token: its messages in the notify file's channels (see [chat.md](chat.md)); requires `GATEWAY_PUBLIC_ORIGIN`",
  },
  GATEWAY_SLACK_SIGNING_SECRET: {
    topic: 'slack',
    text: "the app's signing secret: answers through the Request URL `<base>slack/interactions`",
  },
  GATEWAY_SLACK_APP_TOKEN: {
    topic: 'slack',
    text: 'an app-level token (`connections:write`): answers through Socket Mode, no inbound URL',
  },
  GATEWAY_SLACK_API_URL: { topic: 'slack', text: "Slack's Web API (GovSlack and tests set their own)" },
  GATEWAY_SLACK_CLIENT_ID: {
    topic: 'slack',
    text: "the app's client id: linking a Slack account is confirmed by Sign in with Slack in the same browser (with the secret)",
  },
  GATEWAY_SLACK_CLIENT_SECRET: { topic: 'slack', text: "the app's client secret" },
  GATEWAY_SLACK_OIDC_ISSUER: { topic: 'slack', text: "Sign in with Slack's OpenID issuer" },
  GATEWAY_SLACK_LINK_TTL_S: {
    topic: 'slack',
    text: 'how long a linked Slack account lasts (30 days); it ends sooner with a back-channel logout or a refused refresh (suspended)',
  },
  GATEWAY_TEAMS_APP_ID: {
    topic: 'teams',
    text: "the Teams bot's Microsoft App ID (its Azure Bot's app registration); with the password and tenant, the bot answers at `<base>teams/messages` (see [chat.md](chat.md#microsoft-teams)); requires `GATEWAY_PUBLIC_ORIGIN`",
  },
  GATEWAY_TEAMS_APP_PASSWORD: { topic: 'teams', text: "the app registration's client secret" },
  GATEWAY_TEAMS_TENANT_ID: {
    topic: 'teams',
    text: 'the Entra tenant of the single-tenant bot: activities from any other tenant are refused',
  },
  GATEWAY_TEAMS_OPENID_URL: {
    topic: 'teams',
    text: "the Bot Framework's OpenID metadata, whose keys sign inbound activities (sovereign clouds and tests set their own; https in production)",
  },
  GATEWAY_TEAMS_LOGIN_URL: {
    topic: 'teams',
    text: 'the Entra login origin the bot takes its own token from (`<login>/<tenant>/oauth2/v2.0/token`; sovereign clouds set their own; https in production)',
  },
  GATEWAY_TEAMS_SERVICE_URLS: {
    topic: 'teams',
    text: "URL prefixes (each ending with `/`) an activity's `serviceUrl` must start with before the bot sends its token there: Microsoft's public, GCC, GCC High and DoD connectors by default; https (http only to loopback, outside production)",
  },
  GATEWAY_TEAMS_ENTRA_ISSUER: {
    topic: 'teams',
    text: "the identity provider issuer whose ID tokens' `tid` and `oid` make a person known in Teams with no link step (their latest sign-in's `tid` must be GATEWAY_TEAMS_TENANT_ID); default `<GATEWAY_TEAMS_LOGIN_URL>/<GATEWAY_TEAMS_TENANT_ID>/v2.0`, Entra's own. Only then is the gateway's sign-in Entra's",
  },
  GATEWAY_EVENT_BUFFER: {
    topic: 'events',
    text: "events kept per session for replay (like the runtime's `trace_replay_events`)",
  },
  GATEWAY_EVENT_MAX_BYTES: {
    topic: 'events',
    text: 'the largest event kept; a larger one (or trace line) is skipped and counted, and viewers see a gap in its seq',
  },
  GATEWAY_EVENT_BUFFER_BYTES: {
    topic: 'events',
    text: 'bytes kept per session for replay (payload and frame; Redis: payload); the oldest events go first; at least twice the above',
  },
  GATEWAY_EVENT_BUFFER_TOTAL_BYTES: {
    topic: 'events',
    text: 'bytes kept over all sessions of a replica (embedded mode); the oldest events of any session go first',
  },
  GATEWAY_VIEWER_MAX_QUEUED_BYTES: {
    topic: 'events',
    text: 'bytes queued for a slow viewer before it is disconnected',
  },
  GATEWAY_MAX_STREAMS_PER_OPERATOR: {
    topic: 'events',
    text: 'concurrent event streams per operator, over all replicas in cluster mode (then 429)',
  },
  GATEWAY_STREAM_LINGER_MS: {
    topic: 'events',
    text: 'how long the upstream stream stays open after the last viewer left',
  },
  GATEWAY_STREAM_EAGER: {
    topic: 'events',
    text: "read every registered session's stream even with no viewer (a complete [team report](console.md#the-team-report))",
  },
  GATEWAY_STREAM_AUTH_RECHECK_MS: {
    topic: 'events',
    text: "how often an open stream's credential is checked again",
  },
  GATEWAY_PING_INTERVAL_MS: { topic: 'events', text: '`: ping` heartbeat to viewers' },
  GATEWAY_SOCKET_TAKEOVER: {
    topic: 'events',
    text: "`off`: event streams keep node:http's request state (more memory per viewer) instead of taking the socket over",
  },
  GATEWAY_UPSTREAM_IDLE_TIMEOUT_MS: {
    topic: 'events',
    text: 'an upstream stream silent this long (not even a ping) is dead',
  },
  GATEWAY_CLOSED_POLL_MS: {
    topic: 'events',
    text: 'after `closed`, how often `inbox` is polled for a new run',
  },
  GATEWAY_ENCRYPTION_KEY: {
    topic: 'cluster',
    text: 'comma list of keys, required in cluster mode: the first seals stored tokens, all open them ([rotation](cluster.md#rotating-the-encryption-key))',
  },
  GATEWAY_RESEAL_PER_S: {
    topic: 'cluster',
    text: 'after a key rotation, records sealed again with the first key per second, at most (by one replica)',
  },
  GATEWAY_LEASE_MS: {
    topic: 'cluster',
    text: 'the upstream-reader lease in cluster mode: failover happens within it',
  },
  GATEWAY_SHUTDOWN_GRACE_MS: {
    topic: 'server',
    text: 'on SIGTERM, the most the drain may take before the process exits',
  },
  GATEWAY_OVERLOAD_LOOP_DELAY_MS: {
    topic: 'server',
    text: "shed load (503 `overloaded`, probes excepted) while the event loop's mean delay is over this; `0`: never",
  },
  GATEWAY_OVERLOAD_HEAP_USED_BYTES: {
    topic: 'server',
    text: "shed load while the heap in use is over this; unset: 90% of V8's heap limit; `0`: never",
  },
  GATEWAY_REDIS_PREFIX: {
    topic: 'cluster',
    text: 'prefix of every Redis key (several gateways can share one Redis)',
  },
  GATEWAY_REDIS_COMMAND_TIMEOUT_MS: {
    topic: 'cluster',
    text: 'a Redis command slower than this fails (writes then answer 503 fast)',
  },
  GATEWAY_JWKS_TIMEOUT_MS: {
    topic: 'credentials',
    text: 'JWKS fetch timeout; a failed fetch answers 503 `jwks_unavailable`',
  },
  GATEWAY_PRESENCE_TTL_MS: {
    topic: 'cluster',
    text: 'presence entries and stream slots of a dead replica disappear after this',
  },
  GATEWAY_UPSTREAM_RETRY_SCALE: {
    topic: 'events',
    text: "multiplies the reader's fixed delays (1.5 s poll on 502, 1-2-4…10 s backoff, 30 s after a refused token); tests shorten them",
  },
  OTEL_SDK_DISABLED: { topic: 'tracing', text: '`true`: no tracing even with an endpoint set' },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    topic: 'tracing',
    text: "tracing on: the OTLP/HTTP collector's base URL (`/v1/traces` is appended); see [tracing](operations.md#tracing)",
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    topic: 'tracing',
    text: 'tracing on: the full traces URL, used as it is (wins over the above)',
  },
  OTEL_EXPORTER_OTLP_PROTOCOL: {
    topic: 'tracing',
    text: '`http/protobuf` when neither protocol is set; `grpc` is refused at boot',
  },
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: {
    topic: 'tracing',
    text: 'the same for traces only (wins over the above)',
  },
  OTEL_SERVICE_NAME: { topic: 'tracing', text: "the spans' `service.name`" },
}
