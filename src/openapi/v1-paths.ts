import { ERROR_ANSWER, SECURITY } from './schemas.ts'

/**
 * The Sidebar protocol v1 routes in the OpenAPI document, described from the protocol
 * (/work/shared/spec/sidebar-protocol.md, "Sidebar protocol" v1) rather than by route schemas: the gateway
 * forwards what the runtime accepts and must not validate or strip more than the runtime does, so these routes
 * have no `schema` (no validator, no serialiser) and are added to the document here. The runtime's bodies are
 * open (`additionalProperties: true`): v1 is additive, and a client ignores what it does not recognise.
 *
 * The route table decides which operations exist ({@link V1Operation}, built from upstream/routes.ts and
 * GATEWAY_EXTRA_READ_ROUTES); this module only says what each one carries.
 */

/** One forwarded route as the document needs it (a projection of upstream/routes.ts's `V1Route`). */
export interface V1Operation {
  readonly name: string
  readonly method: 'GET' | 'POST'
  /** Fastify's path after `/desktop/:kasmId/mcp/`. */
  readonly url: string
  readonly access: 'read' | 'write'
  readonly body: 'none' | 'json' | 'multipart'
  readonly query: readonly string[] | 'generic'
  readonly sessionTokenOnly: boolean
  readonly answer: 'json' | 'artifact' | 'attachment'
}

const errorContent = { 'application/json': { schema: { $ref: `#/components/schemas/${ERROR_ANSWER.$id}` } } }

/** A runtime JSON body: what the spec names, the rest open. */
function open(description: string, properties: Record<string, unknown> = {}, required: string[] = []) {
  return {
    type: 'object',
    description,
    properties,
    ...(required.length === 0 ? {} : { required }),
    additionalProperties: true,
  }
}

const str = { type: 'string' }
const int = { type: 'integer', minimum: 0 }

const MESSAGE = open(
  'a message record of the runtime (its fields as the runtime sends them)',
  {
    id: str,
    run: str,
    key: str,
    sender: { type: 'string', enum: ['operator', 'orchestrator'] },
    text: str,
    attachments: { type: 'array', items: str },
    reply_to: str,
    revision: { type: 'integer' },
    values: { type: 'object', additionalProperties: true },
    state: {
      type: 'string',
      description:
        'pending, queued, dispatched, responded, unknown, undelivered (clients show unknown ones as text)',
    },
    rev: int,
    undelivered_reason: str,
  },
  ['id', 'run', 'key', 'state'],
)

const REQUEST = open(
  'a question the run asks a person',
  {
    run: str,
    request_id: str,
    schema_version: { type: 'integer' },
    revision: { type: 'integer' },
    title: str,
    help: str,
    fields: {
      type: 'array',
      items: open(
        'a field: string, integer, number, boolean, string[] or attachment (others may appear)',
        {
          id: str,
          type: str,
          required: { type: 'boolean' },
          label: str,
          hint: str,
          help: str,
        },
        ['id', 'type'],
      ),
    },
    deadline: str,
    state: { type: 'string', enum: ['open', 'closed'] },
    closed_by: { type: 'string', description: 'reply, timeout, cancelled, run_ended' },
  },
  ['run', 'request_id', 'title', 'fields', 'state'],
)

const RUN_CONFLICT = open('the run being served and its epoch (a write for another run)', {
  run: str,
  epoch: str,
})

/** A JSON request body, as the runtime takes it (the gateway forwards its bytes). */
function jsonBody(schema: unknown) {
  return { required: true, content: { 'application/json': { schema } } }
}

/** A response of the runtime's JSON, passed through as sent. */
function json(description: string, schema: unknown) {
  return { description, content: { 'application/json': { schema } } }
}

/** What the gateway itself may answer on a forwarded route (its errors.ts codes), besides the runtime's. */
const GATEWAY_ERRORS = {
  '401': { description: 'no credential, or a refused one (gateway)', content: errorContent },
  '403': {
    description:
      'role too low, cross-site cookie write, or a route that needs the session token (`session_token_only`; gateway)',
    content: errorContent,
  },
  '404': {
    description:
      'unknown or foreign session, or a path that leaves its route (gateway); or the runtime’s 404',
    content: errorContent,
  },
  '429': { description: 'the operator’s request rate (gateway)', content: errorContent },
  '502': {
    description:
      'the runtime is unreachable, refused the gateway’s token, redirected, or answered compressed (gateway); or Kasm’s proxy while the runtime is not up',
    content: errorContent,
  },
  '504': { description: 'the runtime did not answer in time (gateway)', content: errorContent },
}

/** Per route name and method: its request body and the runtime's answers, from the spec. */
const DETAILS: Record<
  string,
  { summary: string; requestBody?: unknown; responses: Record<string, unknown> }
> = {
  'POST messages': {
    summary: 'Send a message, or a reply to a request (`reply_to`, `revision`, `values`)',
    requestBody: jsonBody({
      type: 'object',
      properties: {
        run: { type: 'string', description: 'must be the run being served (else 409)' },
        key: { type: 'string', description: 'idempotency key, unique per run and sender' },
        text: str,
        attachments: { type: 'array', items: str, description: 'ids from POST attachments' },
        reply_to: { type: 'string', description: 'the request this replies to' },
        revision: { type: 'integer', description: 'the request’s revision' },
        values: { type: 'object', additionalProperties: true, description: 'by field id' },
      },
      required: ['run', 'key'],
      description:
        'an unknown field (a `sender` included) is 400 from the runtime; the gateway forwards the bytes as received',
    }),
    responses: {
      '200': json('a repeat with the same content: the stored message', MESSAGE),
      '202': json('stored; follow its delivery events or poll `since=`', MESSAGE),
      '400': json('an unknown or malformed field (runtime)', open('the runtime’s error')),
      '409': json(
        'another run (its run and epoch), a key reused with other content, or a reply to a closed or unknown request (runtime)',
        RUN_CONFLICT,
      ),
      '413': json('text over the runtime’s limit (runtime), or a body over 64 KiB (gateway)', open('error')),
      '422': json(
        'a reply that fails its request’s fields (runtime)',
        open('the fields that failed', {
          fields: { type: 'array', items: open('a field', { field: str, error: str }) },
        }),
      ),
    },
  },
  'GET messages': {
    summary: 'The current run’s messages, by revision (`since=`) or by state (`state=pending,queued`)',
    responses: {
      '200': json(
        'the run’s messages, oldest first',
        open('', { run: str, epoch: str, rev: int, messages: { type: 'array', items: MESSAGE } }),
      ),
      '400': json('a malformed `since` or `state` (runtime)', open('the runtime’s error')),
    },
  },
  'GET messages/:id': {
    summary: 'One message of the current run',
    responses: { '200': json('the message', MESSAGE) },
  },
  'GET runs/messages': {
    summary: 'A message by its run and idempotency key (after a lost answer and a 409 naming another run)',
    responses: {
      '200': json('the stored message', MESSAGE),
      '503': json('that run’s history cannot be read (runtime)', open('the runtime’s error')),
    },
  },
  'POST attachments': {
    summary: 'Upload a file (streamed, never buffered), then list its id in a message',
    requestBody: {
      required: true,
      content: {
        'multipart/form-data': {
          schema: {
            type: 'object',
            properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' } },
            required: ['file'],
          },
        },
      },
    },
    responses: {
      '201': json(
        'stored',
        open('the attachment', { id: str, mime: str, name: str, size: int, sha256: str }, [
          'id',
          'mime',
          'name',
          'size',
          'sha256',
        ]),
      ),
      '413': json('over the upload limit; nothing is kept', open('error')),
      '415': { description: 'not multipart (gateway)', content: errorContent },
    },
  },
  'GET attachments/:id': {
    summary: 'Download an attachment (`inline=1` shows PNG, JPEG, GIF and WebP inline)',
    responses: {
      '200': {
        description:
          'the file with its uploaded type, `Content-Disposition: attachment` unless shown inline; sandboxing CSP, nosniff',
        content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: '*/*' } } },
      },
    },
  },
  'GET requests': {
    summary: 'The run’s requests (`state=open` for the open ones)',
    responses: {
      '200': json('the requests', {
        oneOf: [{ type: 'array', items: REQUEST }, open('the requests and the run')],
      }),
    },
  },
  'GET requests/:id': { summary: 'One request', responses: { '200': json('the request', REQUEST) } },
  'POST requests': {
    summary: 'Create a request: needs the runtime’s session token, which the gateway never holds',
    responses: {
      '403': { description: '`session_token_only`: never forwarded (gateway)', content: errorContent },
    },
  },
  'POST requests/cancel': {
    summary: 'Cancel a request: needs the runtime’s session token, which the gateway never holds',
    responses: {
      '403': { description: '`session_token_only`: never forwarded (gateway)', content: errorContent },
    },
  },
  'POST actions': {
    summary:
      'A control action: `stop`, `finish_handoff` (`ack` needs the session token: 403 from the gateway)',
    requestBody: jsonBody({
      type: 'object',
      properties: {
        run: str,
        key: { type: 'string', description: 'idempotency key, as for messages' },
        action: { type: 'string', enum: ['stop', 'finish_handoff', 'ack'] },
        args: { type: 'object', additionalProperties: true },
      },
      required: ['run', 'key', 'action'],
    }),
    responses: {
      '200': json('a repeat: the stored action', open('the action record')),
      '202': json('accepted', open('the action record', { id: str, run: str, key: str, action: str })),
      '409': json('the wrong state (the state found), or another run (runtime)', open('the refusal')),
    },
  },
  'GET inbox': {
    summary: 'The run id and epoch for every write, the revision to poll from, and what is open',
    responses: {
      '200': json(
        'fields that would be empty or false are left out',
        open(
          'the inbox state',
          {
            run: str,
            epoch: str,
            consumer: { type: 'string', description: '`loop` or `external`' },
            rev: int,
            counts: { type: 'object', additionalProperties: { type: 'integer' } },
            open_requests: { type: 'array', items: str },
            stopping: { type: 'boolean' },
            stopping_tool: str,
            closed: { type: 'boolean' },
            journal_error: str,
          },
          ['run', 'epoch'],
        ),
      ),
    },
  },
  'GET artifacts': {
    summary: 'A file of the run’s output directory (report.json, trace.jsonl, screenshots/*, …)',
    responses: {
      '200': {
        description:
          'the type from the extension (.png, .jpg images; .json JSON; .jsonl, .md, .txt, .tail, .log text; else a download); screenshots cacheable, the rest no-store',
        content: {
          'image/png': { schema: { type: 'string', contentMediaType: 'image/png' } },
          'image/jpeg': { schema: { type: 'string', contentMediaType: 'image/jpeg' } },
          'application/json': { schema: {} },
          'text/plain': { schema: { type: 'string' } },
          'application/octet-stream': {
            schema: { type: 'string', contentMediaType: 'application/octet-stream' },
          },
        },
      },
    },
  },
}

/** The event stream (routes/events.ts): the gateway's own reader, in the runtime's wire format. */
const EVENTS = {
  get: {
    operationId: 'v1.events',
    tags: ['v1'],
    summary:
      'The session’s event stream (server-sent events), replayed from `after`&`run` or `Last-Event-ID`',
    description:
      'Opens with `: run <run_id>`; each event is `id: <run_id>:<seq>`, `event: <type>`, `data: <one trace.jsonl line>`; `: ping` every 15 s; `event: closed` (data `{}`) ends a run without `done`. Role viewer; counts against GATEWAY_MAX_STREAMS_PER_OPERATOR.',
    parameters: [
      kasmIdParameter(),
      { name: 'after', in: 'query', schema: { type: 'string', pattern: '^\\d{1,15}$' } },
      { name: 'run', in: 'query', schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,200}$' } },
      { name: 'Last-Event-ID', in: 'header', schema: { type: 'string', description: '`<run>:<seq>`; wins' } },
    ],
    responses: {
      '200': {
        description: 'the stream',
        content: { 'text/event-stream': { schema: { type: 'string' } } },
      },
      '400': { description: 'a malformed `after` or `run`', content: errorContent },
      '401': GATEWAY_ERRORS['401'],
      '403': GATEWAY_ERRORS['403'],
      '404': { description: 'unknown or foreign session', content: errorContent },
      '429': { description: '`too_many_streams`, `rate_limited`', content: errorContent },
      '503': {
        description: '`store_unavailable` (its replay cannot be read), `shutting_down`',
        content: errorContent,
      },
    },
    security: SECURITY,
  },
}

function kasmIdParameter() {
  return {
    name: 'kasmId',
    in: 'path',
    required: true,
    schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,128}$' },
    description: 'the Kasm session id',
  }
}

/** The OpenAPI path of a route url after the session prefix: `:id` → `{id}`, the artifacts' `*` → `{path}`. */
export function v1Path(url: string): string {
  return `/desktop/{kasmId}/mcp/${url.replace(/:([A-Za-z]+)/g, '{$1}').replace(/\*$/, '{path}')}`
}

/** The document's `paths` for the forwarded v1 routes and the event stream. */
export function v1Paths(routes: readonly V1Operation[]): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = { [v1Path('events')]: EVENTS }
  for (const route of routes) {
    const detail = DETAILS[`${route.method} ${route.name}`] ?? {
      summary: `${route.name}: a read-only route of a newer runtime (GATEWAY_EXTRA_READ_ROUTES)`,
      responses: { '200': json('the runtime’s answer', {}) },
    }
    const names = [...route.url.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1] as string)
    if (route.url.endsWith('*')) names.push('path')
    const query = route.query === 'generic' ? [] : route.query
    const operation = {
      operationId: `v1.${route.method.toLowerCase()}.${route.name}`,
      tags: ['v1'],
      summary: detail.summary,
      description: `Forwarded to the session’s runtime with its messaging token; the runtime’s status and body pass through, its headers are the gateway’s choice. Role: ${route.access === 'read' ? 'viewer' : 'operator'}.${route.sessionTokenOnly ? ' Never forwarded.' : ''}`,
      parameters: [
        kasmIdParameter(),
        ...names.map((name) => ({
          name,
          in: 'path',
          required: true,
          schema: { type: 'string' },
          ...(name === 'path' ? { description: 'a file path under the run’s output directory' } : {}),
        })),
        ...query.map((name) => ({ name, in: 'query', schema: { type: 'string' } })),
      ],
      ...(detail.requestBody === undefined ? {} : { requestBody: detail.requestBody }),
      responses: { ...GATEWAY_ERRORS, ...detail.responses },
      security: SECURITY,
    }
    const path = v1Path(route.url)
    paths[path] = { ...paths[path], [route.method.toLowerCase()]: operation }
  }
  return paths
}
