/**
 * The pieces every route's `schema` is made of: the one error answer (a shared schema, `$ref: 'ErrorAnswer#'`,
 * a component of the OpenAPI document), and the answers that are no JSON (none, a redirect, a page, a text).
 *
 * A JSON answer's schema is also its serialiser (fast-json-stringify), which drops every property it does not
 * declare: each object declares `additionalProperties` on purpose, and test/docs/openapi-conformance*.test.ts
 * check what the handlers really send against it, for every declared answer of every route. Answers that are not JSON are declared by `content` (for the document only:
 * Fastify never serialises a string sent with a type of its own, nor a hijacked stream).
 */

/** The `{error, message, requestId}` body of every error (errors.ts, app.ts's error handler). */
export const ERROR_ANSWER = {
  $id: 'ErrorAnswer',
  type: 'object',
  description:
    'Every error the gateway answers itself: a stable code, a message that never quotes the request, the request id.',
  properties: {
    error: { type: 'string', description: 'stable code, e.g. `session_not_found`', examples: ['forbidden'] },
    message: { type: 'string', description: 'for people; its wording may change' },
    requestId: { type: 'string', description: 'the X-Request-ID of the request' },
    limit: { type: 'integer', description: '`payload_too_large` only: the byte limit the body went over' },
  },
  required: ['error', 'message', 'requestId'],
  additionalProperties: false,
} as const

/** A bearer JWT or the cookie session, as every gateway route that needs a person takes them. */
export const SECURITY: { [scheme: string]: string[] }[] = [{ bearer: [] }, { cookie: [] }]

/** Every shared schema, added once to the app (`app.addSchema`) before any route. */
export const SHARED_SCHEMAS = [ERROR_ANSWER] as const

const errorRef = { $ref: 'ErrorAnswer#' } as const

/**
 * The error answers of a route: JSON to a program, the same code and message as a page to a browser's
 * navigation (pages/plugin.ts).
 */
export const ERRORS = {
  '4xx': {
    description: 'refused: `{error, message, requestId}` (a page for a browser navigation)',
    content: { 'application/json': { schema: errorRef }, 'text/html': { schema: { type: 'string' } } },
  },
  '5xx': {
    description: 'the gateway or what it depends on failed (same shape)',
    content: { 'application/json': { schema: errorRef }, 'text/html': { schema: { type: 'string' } } },
  },
} as const

/** An answer without a body. */
export function noContent(description: string) {
  return { type: 'null', description } as const
}

/** A redirect: no body, a `Location`. */
export function redirect(description: string) {
  return {
    type: 'null',
    description,
    headers: { location: { type: 'string', description: 'where to go' } },
  } as const
}

/** An answer of one non-JSON media type (a page, a text, a stream), its body a string. */
export function text(mediaType: string, description: string) {
  return { description, content: { [mediaType]: { schema: { type: 'string' } } } } as const
}

/** A page for a person (pages/, the console). */
export function page(description: string) {
  return text('text/html', description)
}

/** A JSON object whose every property is declared: required are those listed in `required`. */
export function object<P extends Record<string, unknown>, R extends readonly (keyof P & string)[]>(
  properties: P,
  required: R,
  description?: string,
) {
  return {
    type: 'object',
    ...(description === undefined ? {} : { description }),
    properties,
    required,
    additionalProperties: false,
  } as const
}

/** An ISO 8601 time, as every time in an answer is. */
export const TIME = { type: 'string', format: 'date-time' } as const

/** A session id (sessions/types.ts KASM_ID). */
export const KASM_ID_SCHEMA = { type: 'string', pattern: '^[A-Za-z0-9_-]{1,128}$' } as const
