import { ERRORS, KASM_ID_SCHEMA, noContent, object, SECURITY, TIME } from '../schemas.ts'

const str = { type: 'string' } as const

/** A registered session as the admin API shows it (sessions/types.ts `SessionView`): never its token. */
const SESSION_VIEW_PROPERTIES = {
  kasmId: KASM_ID_SCHEMA,
  upstream: { type: 'string', description: 'the runtime’s base URL' },
  team: str,
  source: { type: 'string', enum: ['file', 'admin', 'demo', 'launch', 'kasm'] },
  version: { type: 'integer', description: 'changes with every replacement' },
  kasmUserId: { type: 'string', description: 'the Kasm user a launched session runs as' },
  staleSince: { ...TIME, description: 'the Kasm sync found no such session in Kasm since then' },
} as const
const SESSION_REQUIRED = ['kasmId', 'upstream', 'team', 'source', 'version'] as const
const SESSION_VIEW = object(SESSION_VIEW_PROPERTIES, SESSION_REQUIRED, 'a registered session')

/** An audit record (audit/types.ts `AuditRecord`). */
const AUDIT_RECORD = object(
  {
    at: TIME,
    requestId: str,
    clientIp: str,
    sub: { type: ['string', 'null'] },
    name: str,
    kasmId: { type: ['string', 'null'] },
    team: { type: ['string', 'null'] },
    method: str,
    route: {
      type: 'string',
      description: 'the route’s name (`messages`, `admin/sessions`, `auth/callback`, …)',
    },
    key: str,
    run: str,
    replyTo: str,
    question: { type: 'string', description: 'the question a claim (route `claim`) is about' },
    action: str,
    via: { type: 'string', enum: ['console', 'sidebar', 'api', 'slack', 'msteams'] },
    outcome: { type: 'string', enum: ['forwarded', 'refused', 'aborted'] },
    status: { type: 'integer' },
    upstreamStatus: { type: 'integer' },
    latencyMs: { type: 'number' },
    error: str,
    reason: str,
  },
  ['at', 'requestId', 'sub', 'kasmId', 'method', 'route', 'outcome', 'status', 'latencyMs'],
  'who did what to which session; never a message’s text or a token',
)

/** A webhook or chat delivery (notify/ledger.ts `DeliveryRecord`): no URL, it may hold a key. */
const DELIVERY = object(
  {
    delivery: str,
    type: { type: 'string', description: 'the transition: `request.opened`, `handoff.started`, …' },
    reminder: { type: 'boolean' },
    kasmId: str,
    team: str,
    run: str,
    seq: { type: 'integer' },
    target: { type: 'string', description: '`<host>#<index>` or `team:<name>#<index>`' },
    status: { type: 'string', enum: ['sending', 'retrying', 'sent', 'failed', 'dropped'] },
    attempts: { type: 'integer' },
    httpStatus: { type: ['integer', 'null'] },
    error: { type: ['string', 'null'] },
    createdAt: TIME,
    updatedAt: TIME,
  },
  [
    'delivery',
    'type',
    'reminder',
    'kasmId',
    'team',
    'run',
    'seq',
    'target',
    'status',
    'attempts',
    'httpStatus',
    'error',
    'createdAt',
    'updatedAt',
  ],
)

const UNREADABLE = object(
  {
    kasmId: str,
    team: { type: ['string', 'null'], description: 'null when the record is not even readable JSON' },
    reason: { type: 'string', enum: ['malformed', 'unknown_key', 'undecryptable', 'wrong_session'] },
  },
  ['kasmId', 'team', 'reason'],
)

const PRESENCE = object(
  {
    kasmId: str,
    viewers: { type: 'integer', description: 'open event streams' },
    operators: {
      type: 'array',
      items: object({ sub: str, name: str, viewers: { type: 'integer' } }, ['sub', 'viewers']),
    },
  },
  ['kasmId', 'viewers', 'operators'],
)

const KASM_ID_PARAMS = {
  type: 'object',
  properties: { kasmId: { type: 'string', description: 'the Kasm session id' } },
  required: ['kasmId'],
} as const

const tags = ['admin']
const security = SECURITY

/** `admin/*` (routes/admin.ts, routes/presence.ts). */
export const ADMIN = {
  list: {
    tags,
    security,
    summary: 'The sessions of your teams (never tokens)',
    response: { 200: object({ sessions: { type: 'array', items: SESSION_VIEW } }, ['sessions']), ...ERRORS },
  },
  get: {
    tags,
    security,
    summary: 'One session',
    params: KASM_ID_PARAMS,
    response: { 200: SESSION_VIEW, ...ERRORS },
  },
  launch: {
    tags,
    security,
    summary: 'Launch a session in Kasm as the team’s Kasm user, with a messaging token the gateway mints',
    // Its body: routes/admin.ts, from the zod schema that checks it.
    response: {
      201: object(
        {
          ...SESSION_VIEW_PROPERTIES,
          viewerUrl: { type: 'string', description: 'Kasm’s viewer link, when Kasm gave one' },
        },
        SESSION_REQUIRED,
        'the session registered',
      ),
      ...ERRORS,
    },
  },
  put: {
    tags,
    security,
    summary: 'Register a session (201), or replace one or rotate its token (200)',
    // Its parameter and body: routes/admin.ts, from the zod schemas that check them.
    response: {
      200: { ...SESSION_VIEW, description: 'replaced' },
      201: { ...SESSION_VIEW, description: 'registered' },
      ...ERRORS,
    },
  },
  remove: {
    tags,
    security,
    summary: 'Remove a session (a launched one is destroyed in Kasm first)',
    params: KASM_ID_PARAMS,
    response: { 204: noContent('removed'), ...ERRORS },
  },
  presence: {
    tags,
    security,
    summary: 'Who watches the session now (every replica)',
    params: KASM_ID_PARAMS,
    response: { 200: PRESENCE, ...ERRORS },
  },
  unreadable: {
    tags,
    security,
    summary: 'Stored records no configured encryption key opens (ids, teams and why only)',
    response: { 200: object({ sessions: { type: 'array', items: UNREADABLE } }, ['sessions']), ...ERRORS },
  },
  dropUnreadable: {
    tags,
    security,
    summary: 'Delete one unreadable record (audited)',
    params: KASM_ID_PARAMS,
    response: { 204: noContent('deleted'), ...ERRORS },
  },
  audit: {
    tags,
    security,
    summary: 'Recent audit records of your teams’ sessions, newest first',
    response: { 200: object({ records: { type: 'array', items: AUDIT_RECORD } }, ['records']), ...ERRORS },
  },
  notifications: {
    tags,
    security,
    summary: 'Recent webhook and chat deliveries of your teams’ sessions, newest first',
    response: { 200: object({ deliveries: { type: 'array', items: DELIVERY } }, ['deliveries']), ...ERRORS },
  },
} as const
