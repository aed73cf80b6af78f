import type { FastifyRequest } from 'fastify'
import { z } from 'zod'
import { BadRequest } from '../errors.ts'
import { formatIssues } from '../sessions/validate.ts'
import { type JsonSchema, jsonSchemaOf } from './json-schema.ts'

/** The parts of a request a route checks with zod: each is parsed by, and documented from, the same schema. */
export interface ZodParts {
  readonly body?: z.ZodTypeAny
  readonly querystring?: z.ZodTypeAny
  readonly params?: z.AnyZodObject
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The zod schemas the route parses its request with ({@link zodInput}). */
    zodInput?: ZodParts
  }
}

type Parsed<S> = S extends z.ZodTypeAny ? z.output<S> : never

/** What {@link zodInput} gives a route: its config, and the parsers of its parts. */
export interface ZodInput<P extends ZodParts> {
  /**
   * The route's `config`: `swaggerTransform` puts the parts' JSON Schemas in the document (for the document
   * only: Fastify's validator, which coerces types and strips unknown properties, never sees them), and
   * `zodInput` names the parts, for the tests that hold the document to them. A route's own
   * `swaggerTransform` replaces the plugin's (openapi/plugin.ts), which only hides the forwarded v1 routes
   * and static assets: never use this on those.
   */
  readonly config: {
    readonly swaggerTransform: (route: { schema: object; url: string }) => { schema: object; url: string }
    readonly zodInput: P
  }
  /** The body, parsed; 400 `bad_request` with zod's messages (never the values) when refused. */
  body(request: FastifyRequest): Parsed<P['body']>
  /** The query string, parsed; 400 `bad_request` when refused. */
  query(request: FastifyRequest): Parsed<P['querystring']>
  /** The path's parameters, parsed; 400 `bad_request` when refused. */
  params(request: FastifyRequest): Parsed<P['params']>
}

/**
 * The one place a route's zod schemas are both its check and its documentation: a route passes `config` to
 * Fastify and parses its body, query string or parameters through the same object, in its handler (where
 * it decides the order: authenticated and audited first, then parsed). The zod schemas stay the check
 * because their messages, strict objects and transforms (a normalised upstream URL, a trimmed team) are what
 * the routes promise; test/docs/openapi-input.test.ts fails if a route parses a request with zod any other way.
 */
export function zodInput<P extends ZodParts>(parts: P): ZodInput<P> {
  const documented: Record<string, JsonSchema> = {}
  for (const [part, schema] of Object.entries(parts) as [keyof ZodParts, z.ZodTypeAny][])
    documented[part] = jsonSchemaOf(schema)
  return {
    config: {
      swaggerTransform: ({ schema, url }) => ({ schema: { ...schema, ...documented }, url }),
      zodInput: parts,
    },
    body: (request) => {
      const { body } = request
      if (typeof body !== 'object' || body === null || Array.isArray(body))
        throw new BadRequest(`body must be a JSON object ${shapeOf(parts.body)}`)
      return parse(parts.body, body) as Parsed<P['body']>
    },
    query: (request) => parse(parts.querystring, request.query) as Parsed<P['querystring']>,
    params: (request) => parse(parts.params, request.params) as Parsed<P['params']>,
  }
}

function parse(schema: z.ZodTypeAny | undefined, value: unknown): unknown {
  if (schema === undefined) throw new TypeError('this route declared no such part')
  const result = schema.safeParse(value)
  if (!result.success) throw new BadRequest(formatIssues(result.error))
  return result.data
}

/** `{a, b?, c}`: the properties a body takes, for the message refusing one that is no object. */
function shapeOf(schema: z.ZodTypeAny | undefined): string {
  let inner = schema
  while (inner instanceof z.ZodEffects) inner = inner.innerType()
  if (!(inner instanceof z.ZodObject)) return ''
  const names = Object.entries(inner.shape as z.ZodRawShape).map(([key, value]) =>
    value.isOptional() ? `${key}?` : key,
  )
  return `{${names.join(', ')}}`
}
