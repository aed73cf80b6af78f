import assert from 'node:assert/strict'
import { readdir, readFile } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Ajv2020 } from 'ajv/dist/2020.js'
import type { RouteOptions } from 'fastify'
import { z } from 'zod'
import { jsonSchemaOf } from '../../src/openapi/json-schema.ts'
import type { ZodParts } from '../../src/openapi/zod-input.ts'
import { SESSION_PREFIX } from '../../src/upstream/routes.ts'
import { builtDocument, openapiPath } from './document.ts'

/**
 * What a gateway route takes (its body, query string, path parameters) is documented from the schema that
 * checks it, never from a copy: a route checked by Fastify declares JSON Schemas on the route (Fastify
 * validates with them, the document shows them); a route checked by zod goes through openapi/zod-input.ts,
 * whose document is made from the very zod schemas it parses with (openapi/json-schema.ts). These tests hold
 * that: the document shows each zod-checked part as converted, the conversion agrees with zod on real inputs
 * (never refusing what the route takes), no route parses a request with zod any other way, and no route
 * takes a body the document does not describe.
 */

interface Operation {
  parameters?: { in: string; name: string; required: boolean; schema: Record<string, unknown> }[]
  requestBody?: { content: Record<string, { schema: Record<string, unknown> }> }
}
interface Document {
  paths: Record<string, Record<string, Operation>>
}

const built = builtDocument<Document>()

function operationOf(document: Document, route: RouteOptions, method: string): Operation {
  const operation = document.paths[openapiPath(route.url)]?.[method.toLowerCase()]
  assert.ok(operation, `${method} ${route.url} is in the document`)
  return operation
}

/** The routes checked with zod, each method once. */
async function zodRoutes(): Promise<
  { name: string; route: RouteOptions; method: string; parts: ZodParts }[]
> {
  const { routes } = await built
  return routes.flatMap((route) => {
    const parts = route.config?.zodInput
    if (parts === undefined) return []
    return [route.method]
      .flat()
      .filter((m) => m !== 'HEAD')
      .map((method) => ({ name: `${method} ${route.url}`, route, method, parts }))
  })
}

test('the zod-checked routes are the admin API’s and the Teams endpoint’s, and the document shows each part as its zod schema converts', async () => {
  const { document } = await built
  const found = await zodRoutes()
  assert.deepEqual(found.map((r) => r.name).sort(), Object.keys(SAMPLES).sort(), 'SAMPLES names each of them')
  for (const { name, route, method, parts } of found) {
    const operation = operationOf(document, route, method)
    if (parts.body !== undefined)
      assert.deepEqual(
        operation.requestBody?.content['application/json']?.schema,
        jsonSchemaOf(parts.body),
        `${name}: its body`,
      )
    for (const [part, where] of [
      ['querystring', 'query'],
      ['params', 'path'],
    ] as const) {
      const schema = parts[part]
      if (schema === undefined) continue
      const converted = jsonSchemaOf(schema) as {
        properties: Record<string, Record<string, unknown>>
        required?: string[]
      }
      const documented = (operation.parameters ?? []).filter((p) => p.in === where)
      assert.deepEqual(
        documented.map((p) => p.name).sort(),
        Object.keys(converted.properties).sort(),
        `${name}: its ${part}'s names`,
      )
      for (const parameter of documented) {
        const { description, ...property } = converted.properties[parameter.name] ?? {}
        assert.deepEqual(parameter.schema, property, `${name}: ${parameter.name}`)
        assert.equal(
          parameter.required,
          converted.required?.includes(parameter.name) ?? false,
          parameter.name,
        )
        assert.equal((parameter as { description?: unknown }).description, description, parameter.name)
      }
    }
  }
})

/**
 * Inputs for each zod-checked route: what it takes, what it refuses, and what only its code refuses (a rule
 * JSON Schema cannot say, told in the part's description). A new zod-checked route must add its own.
 */
const SAMPLES: Record<
  string,
  Partial<Record<keyof ZodParts, { takes: unknown[]; refuses: unknown[]; codeRefuses?: unknown[] }>>
> = {
  'POST /admin/sessions': {
    body: {
      takes: [
        { image: 'kasmweb/chrome:1.16.0', team: 'blue' },
        { image_id: 'abc-123', user_id: 'u1', team: 'blue', environment: { A_1: 'x' } },
      ],
      refuses: [
        {},
        { image: 'x' },
        { image: 'x', team: 'blue', tenant: 'x' },
        { image: '', team: 'blue' },
        { image: 'x'.repeat(257), team: 'blue' },
        { image_id: 'a b', team: 'blue' },
        { image: 'x', user_id: 'u/1', team: 'blue' },
        { image: 'x', team: '' },
        { image: 'x', team: 't'.repeat(257) },
        { image: 'x', team: 7 },
        { image: 'x', team: 'blue', environment: { '1A': 'x' } },
        { image: 'x', team: 'blue', environment: { A: 1 } },
        { image: 'x', team: 'blue', environment: { A: 'x'.repeat(4097) } },
        [],
        'x',
      ],
      codeRefuses: [
        { team: 'blue' },
        { image: 'x', image_id: 'y', team: 'blue' },
        { image: 'x', team: '   ' },
        {
          image: 'x',
          team: 'blue',
          environment: Object.fromEntries([...Array(65).keys()].map((i) => [`V${i}`, ''])),
        },
      ],
    },
  },
  'PUT /admin/sessions/:kasmId': {
    params: {
      takes: [{ kasmId: 'k1' }, { kasmId: 'A_b-9' }],
      refuses: [{ kasmId: 'a b' }, { kasmId: 'k'.repeat(129) }, {}],
    },
    body: {
      takes: [
        { team: 'blue', messagingToken: 'tok' },
        { upstream: 'http://runtime:8080', team: 'blue', messagingToken: 'tok', lifecycle: 'kasm' },
      ],
      refuses: [
        {},
        { team: 'blue' },
        { team: 'blue', messagingToken: 'has space' },
        { team: 'blue', messagingToken: '' },
        { team: 'blue', messagingToken: 't'.repeat(4097) },
        { team: 'blue', messagingToken: 'tok', source: 'file' },
        { team: 'blue', messagingToken: 'tok', lifecycle: 'never' },
        { team: 'blue', messagingToken: 'tok', upstream: 7 },
        { team: '', messagingToken: 'tok' },
      ],
      codeRefuses: [
        { team: 'blue', messagingToken: 'tok', upstream: 'ftp://runtime/' },
        { team: 'blue', messagingToken: 'tok', upstream: 'http://u:p@runtime/' },
        { team: 'blue', messagingToken: 'tok', upstream: 'http://runtime/?a=1' },
        { team: ' ', messagingToken: 'tok' },
      ],
    },
  },
  'POST /teams/messages': {
    body: {
      takes: [
        {
          type: 'message',
          serviceUrl: 'https://smba.trafficmanager.net/amer/',
          from: { id: '29:u' },
          conversation: { id: '19:c@thread.tacv2' },
        },
        {
          type: 'invoke',
          name: 'adaptiveCard/action',
          id: 'f:1',
          serviceUrl: 'https://smba.trafficmanager.net/amer/',
          channelId: 'msteams',
          from: { id: '29:u', aadObjectId: 'oid', name: 'Olivia' },
          recipient: { id: '28:bot' },
          conversation: {
            id: '19:c@thread.tacv2',
            conversationType: 'channel',
            tenantId: 't',
            isGroup: true,
          },
          channelData: { tenant: { id: 't' }, team: { id: 'x', name: 'T' }, channel: { id: 'y' } },
          value: { action: { verb: 'v', data: {} } },
          entities: [{ type: 'mention', mentioned: { id: '28:bot' }, text: '<at>b</at>' }],
          membersAdded: [{ id: '28:bot' }],
          timestamp: '2026-12-06T00:00:00Z',
        },
      ],
      refuses: [
        {},
        { type: 'message', from: { id: '29:u' }, conversation: { id: '19:c' } },
        { type: '', serviceUrl: 'https://x/', from: { id: '29:u' }, conversation: { id: '19:c' } },
        { type: 'message', serviceUrl: 'https://x/', from: {}, conversation: { id: '19:c' } },
        { type: 'message', serviceUrl: 'https://x/', from: { id: '29:u' }, conversation: { id: 7 } },
        {
          type: 'message',
          serviceUrl: 'https://x/',
          from: { id: '29:u' },
          conversation: { id: '19:c' },
          entities: [{ text: 'no type' }],
        },
      ],
    },
  },
  'GET /admin/audit': {
    querystring: {
      takes: [{}, { limit: '5' }, { kasmId: 'k1', sub: 'alice' }, { limit: '1000' }],
      refuses: [
        { limit: '0' },
        { limit: '1001' },
        { limit: '2.5' },
        { kasmId: 'a b' },
        { sub: '' },
        { since: '1' },
      ],
    },
  },
  'GET /admin/notifications': {
    querystring: {
      takes: [{}, { limit: '1' }, { kasmId: 'k1' }],
      refuses: [{ limit: '0' }, { limit: 'x' }, { kasmId: 'a/b' }, { sub: 'alice' }],
    },
  },
}

test('on real inputs, the document refuses what the route refuses, and never what it takes', async () => {
  for (const { name, parts } of await zodRoutes()) {
    for (const [part, schema] of Object.entries(parts) as [keyof ZodParts, z.ZodTypeAny][]) {
      const samples = SAMPLES[name]?.[part]
      assert.ok(samples, `${name}: SAMPLES has its ${part}`)
      // A query string's values arrive as text: the document's integer is a number written in it.
      const ajv = new Ajv2020({ strict: true, allErrors: true, coerceTypes: part === 'querystring' })
      const documented = ajv.compile(jsonSchemaOf(schema))
      const checks = (value: unknown) => ({
        route: schema.safeParse(value).success,
        document: documented(structuredClone(value)),
      })
      for (const value of samples.takes)
        assert.deepEqual(
          checks(value),
          { route: true, document: true },
          `${name} ${part} takes ${JSON.stringify(value)}`,
        )
      for (const value of samples.refuses)
        assert.deepEqual(
          checks(value),
          { route: false, document: false },
          `${name} ${part} refuses ${JSON.stringify(value)}`,
        )
      for (const value of samples.codeRefuses ?? [])
        assert.deepEqual(
          checks(value),
          { route: false, document: true },
          `${name} ${part}: only its code refuses ${JSON.stringify(value)}`,
        )
    }
  }
})

test('the conversion: each kind of zod schema the routes use, and a kind it does not know is an error', () => {
  assert.deepEqual(
    jsonSchemaOf(
      z
        .object({
          a: z.string().trim().min(1).max(8).regex(/^x+$/).describe('an a'),
          b: z.coerce.number().int().min(1).max(9).default(3),
          c: z.number().gt(0).lt(1).optional(),
          d: z.enum(['x', 'y']),
          e: z.record(z.string().regex(/^[A-Z]+$/), z.string().length(2)),
          f: z.array(z.boolean()).min(1).max(2),
          g: z.string().nullable(),
          h: z.union([z.literal('one'), z.number()]),
          i: z.string().transform((s) => s.length),
        })
        .strict()
        .refine(() => true)
        .describe('all of them'),
    ),
    {
      type: 'object',
      description: 'all of them',
      properties: {
        a: { type: 'string', minLength: 1, maxLength: 8, pattern: '^x+$', description: 'an a' },
        b: { type: 'integer', minimum: 1, maximum: 9, default: 3 },
        c: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 },
        d: { type: 'string', enum: ['x', 'y'] },
        e: {
          type: 'object',
          propertyNames: { type: 'string', pattern: '^[A-Z]+$' },
          additionalProperties: { type: 'string', minLength: 2, maxLength: 2 },
        },
        f: { type: 'array', items: { type: 'boolean' }, minItems: 1, maxItems: 2 },
        g: { anyOf: [{ type: 'string' }, { type: 'null' }] },
        h: { anyOf: [{ const: 'one' }, { type: 'number' }] },
        i: { type: 'string' },
      },
      required: ['a', 'd', 'e', 'f', 'g', 'h', 'i'],
      additionalProperties: false,
    },
  )
  // zod's default object strips unknown keys: they may be sent.
  assert.deepEqual(jsonSchemaOf(z.object({})), { type: 'object', properties: {}, additionalProperties: true })
  for (const [unknown, why] of [
    [z.date(), /ZodDate/],
    [z.string().email(), /email/],
    [z.string().regex(/^a$/i), /flags/],
    [z.string().regex(/a/).regex(/b/), /two patterns/],
    [z.object({ a: z.bigint() }), /ZodBigInt/],
  ] as const)
    assert.throws(() => jsonSchemaOf(unknown), why)
})

/** The source files under src/, but the one that parses route input for every route. */
async function sources(): Promise<{ file: string; text: string }[]> {
  const root = fileURLToPath(new URL('../../src/', import.meta.url))
  const entries = await readdir(root, { recursive: true })
  const files = entries.filter((f) => f.endsWith('.ts') && !f.endsWith('openapi/zod-input.ts'))
  return Promise.all(
    files.map(async (f) => ({
      file: relative(root, join(root, f)),
      text: await readFile(join(root, f), 'utf8'),
    })),
  )
}

test('no route parses its request with zod but through zod-input.ts (which documents what it parses)', async () => {
  const direct = /\.(safeParse|parse|safeParseAsync|parseAsync)\(\s*request\.(body|query|params)\b/
  const offending = (await sources()).filter(({ text }) => direct.test(text)).map(({ file }) => file)
  assert.deepEqual(offending, [], 'parse it with zodInput({ body | querystring | params }) instead')
  // The check itself: it would find the way the admin routes parsed before.
  assert.ok(direct.test('const body = launchBodySchema.safeParse(request.body)'))
})

/**
 * The gateway's routes that take a request body without a JSON Schema in the document, and why. Every other
 * POST, PUT, PATCH and DELETE either takes no body or documents the one it checks.
 */
const BODIES_NOT_JSON: Readonly<Record<string, string>> = {
  'POST /auth/backchannel-logout': 'a form with `logout_token`, read by the route (the description says so)',
  'POST /slack/interactions':
    'Slack’s form with `payload`, whose bytes the signature covers (the description)',
  'POST /auth/slack-link/code': 'a form with `code` from the linking page',
}

/** Routes that read no body at all. */
const NO_BODY: readonly string[] = [
  'POST /auth/session',
  'DELETE /auth/session',
  'POST /auth/logout',
  'POST /auth/slack-link/confirm',
  'DELETE /admin/sessions/:kasmId',
  'DELETE /admin/unreadable-sessions/:kasmId',
  'PUT /api/sessions/:kasmId/requests/:requestId/claim',
  'DELETE /api/sessions/:kasmId/requests/:requestId/claim',
  'DELETE /api/chat-links/:chat/:workspace/:user',
  'DELETE /admin/chat-links/:chat/:workspace/:user',
]

test('every gateway route that takes a body documents it, or is listed as taking a form or none', async () => {
  const { routes, document } = await built
  // The runtime's routes, forwarded: the protocol says what they take (v1-paths.ts), not the gateway.
  const forwarded = SESSION_PREFIX.split(':')[0] as string
  const undocumented: string[] = []
  for (const route of routes) {
    if (route.url.startsWith(forwarded)) continue
    for (const method of [route.method].flat()) {
      if (!['POST', 'PUT', 'PATCH', 'DELETE'].includes(method)) continue
      const name = `${method} ${route.url}`
      const operation = document.paths[openapiPath(route.url)]?.[method.toLowerCase()]
      assert.ok(operation, `${name} is in the document`)
      if (operation.requestBody !== undefined || name in BODIES_NOT_JSON || NO_BODY.includes(name)) continue
      undocumented.push(name)
    }
  }
  assert.deepEqual(undocumented, [], 'declare the body (schema.body, or zodInput) or list the route here')
})
