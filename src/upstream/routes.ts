import type { Access } from '../auth/operator.ts'
import { ConfigError } from '../config.ts'
import type { AnswerKind } from './answer-policy.ts'
import {
  isExtraRouteName,
  isKeyParam,
  isSafeParam,
  joinSegments,
  MAX_ID_CHARS,
  parseArtifactPath,
  rawPath,
} from './paths.ts'
import type { QueryPolicy } from './query.ts'

/**
 * The Sidebar protocol v1 routes the gateway serves under `/desktop/:kasmId/mcp/` (except `events`, which has
 * its own reader), and how each maps to the runtime. Anything not listed here, or in GATEWAY_EXTRA_READ_ROUTES,
 * answers 404.
 */

/** Where the v1 routes are mounted: the sidebar derives it from its viewer URL (`/desktop/<id>/vnc/...`). */
export const SESSION_PREFIX = '/desktop/:kasmId/mcp/'

/** What a route's request body is. */
export type BodyKind = 'none' | 'json' | 'multipart'

/** What a route needs from the request to build its upstream path. */
export interface PathInput {
  /** Route parameters, percent-decoded once by the router. */
  readonly params: Readonly<Record<string, string | undefined>>
  /** The request URL exactly as received (still encoded, query included). */
  readonly url: string
}

/** One v1 route. */
export interface V1Route {
  /** Stable name for audit records and metric labels (never carries request input). */
  readonly name: string
  readonly method: 'GET' | 'POST'
  /** Fastify path after {@link SESSION_PREFIX}. */
  readonly url: string
  readonly access: Extract<Access, 'read' | 'write'>
  readonly body: BodyKind
  /** Query parameters forwarded upstream. */
  readonly query: QueryPolicy
  /** Needs the runtime session token, which the gateway never holds: 403 session_token_only, never forwarded. */
  readonly sessionTokenOnly: boolean
  /** How its answers are shaped for the browser (answer-policy.ts): JSON, a run file, an uploaded file. */
  readonly answer: AnswerKind
  /** The upstream path relative to the session base, rebuilt from validated parts; undefined: 404. */
  readonly path: (input: PathInput) => string | undefined
}

const id = (v: string | undefined) => isSafeParam(v, MAX_ID_CHARS)

function route(
  r: Omit<V1Route, 'query' | 'sessionTokenOnly' | 'body' | 'answer'> &
    Partial<Pick<V1Route, 'query' | 'sessionTokenOnly' | 'body' | 'answer'>>,
): V1Route {
  return { query: [], sessionTokenOnly: false, body: 'none', answer: 'json', ...r }
}

/** The raw artifacts path after `/desktop/<id>/mcp/artifacts/`, from the URL as received. */
function rawArtifactPath(url: string): string | undefined {
  const parts = rawPath(url).split('/')
  // ['', 'desktop', <kasmId>, 'mcp', 'artifacts', ...file]
  if (parts[1] !== 'desktop' || parts[3] !== 'mcp' || parts[4] !== 'artifacts') return undefined
  return parts.slice(5).join('/')
}

/** Every v1 route the gateway proxies (events excepted). */
export const V1_ROUTES: readonly V1Route[] = [
  route({
    name: 'messages',
    method: 'POST',
    url: 'messages',
    access: 'write',
    body: 'json',
    path: () => 'messages',
  }),
  route({
    name: 'messages',
    method: 'GET',
    url: 'messages',
    access: 'read',
    query: ['since', 'state'],
    path: () => 'messages',
  }),
  route({
    name: 'messages/:id',
    method: 'GET',
    url: 'messages/:id',
    access: 'read',
    path: ({ params }) => (id(params.id) ? joinSegments(['messages', params.id!]) : undefined),
  }),
  route({
    name: 'runs/messages',
    method: 'GET',
    url: 'runs/:run/messages/:key',
    access: 'read',
    path: ({ params }) =>
      id(params.run) && isKeyParam(params.key)
        ? joinSegments(['runs', params.run!, 'messages', params.key!])
        : undefined,
  }),
  route({
    name: 'attachments',
    method: 'POST',
    url: 'attachments',
    access: 'write',
    body: 'multipart',
    path: () => 'attachments',
  }),
  route({
    name: 'attachments/:id',
    method: 'GET',
    url: 'attachments/:id',
    access: 'read',
    query: ['inline'],
    answer: 'attachment',
    path: ({ params }) => (id(params.id) ? joinSegments(['attachments', params.id!]) : undefined),
  }),
  route({
    name: 'requests',
    method: 'GET',
    url: 'requests',
    access: 'read',
    query: ['state'],
    path: () => 'requests',
  }),
  route({
    name: 'requests/:id',
    method: 'GET',
    url: 'requests/:id',
    access: 'read',
    path: ({ params }) => (id(params.id) ? joinSegments(['requests', params.id!]) : undefined),
  }),
  route({
    name: 'requests',
    method: 'POST',
    url: 'requests',
    access: 'write',
    body: 'json',
    sessionTokenOnly: true,
    path: () => undefined,
  }),
  route({
    name: 'requests/cancel',
    method: 'POST',
    url: 'requests/:id/cancel',
    access: 'write',
    body: 'json',
    sessionTokenOnly: true,
    path: () => undefined,
  }),
  route({
    name: 'actions',
    method: 'POST',
    url: 'actions',
    access: 'write',
    body: 'json',
    path: () => 'actions',
  }),
  route({ name: 'inbox', method: 'GET', url: 'inbox', access: 'read', path: () => 'inbox' }),
  route({
    name: 'artifacts',
    method: 'GET',
    url: 'artifacts/*',
    access: 'read',
    answer: 'artifact',
    path: ({ url }) => {
      const raw = rawArtifactPath(url)
      const segments = raw === undefined ? undefined : parseArtifactPath(raw)
      return segments === undefined ? undefined : `artifacts/${joinSegments(segments)}`
    },
  }),
]

/** First segments an extra route may not use: the v1 routes' own (and `events`, served elsewhere). */
const RESERVED_ROOTS: ReadonlySet<string> = new Set([
  ...V1_ROUTES.map((r) => r.url.split('/')[0] ?? ''),
  'events',
])

/**
 * The read-only routes named in GATEWAY_EXTRA_READ_ROUTES (a newer runtime's additions): GET only, read access,
 * forwarded to the same path with safe query parameters. Throws a ConfigError naming the entry when a name is invalid or
 * shadows a v1 route.
 */
export function extraReadRoutes(names: readonly string[]): V1Route[] {
  const out: V1Route[] = []
  for (const name of new Set(names)) {
    if (!isExtraRouteName(name)) {
      throw new ConfigError(
        `invalid configuration: GATEWAY_EXTRA_READ_ROUTES: "${name}" is not a route name (1-4 segments of letters, digits, "_", "-")`,
      )
    }
    if (RESERVED_ROOTS.has(name.split('/')[0] ?? '')) {
      throw new ConfigError(
        `invalid configuration: GATEWAY_EXTRA_READ_ROUTES: "${name}" would shadow a v1 route`,
      )
    }
    out.push(route({ name, method: 'GET', url: name, access: 'read', query: 'generic', path: () => name }))
  }
  return out
}
