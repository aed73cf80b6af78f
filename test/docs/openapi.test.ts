import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { Validator } from '@seriousme/openapi-schema-validator'
import { DOCUMENT_ENV, OPENAPI_JSON, openapiJson } from '../../scripts/docs-openapi.ts'
import { HIDDEN_ROUTES } from '../../src/openapi/plugin.ts'
import { startGateway } from '../helpers/gateway.ts'
import { bearer } from '../helpers/jwt.ts'
import { builtDocument, openapiPath } from './document.ts'

/**
 * The OpenAPI document (`<base>api/openapi.json`, docs/openapi.json): a valid OpenAPI 3.1 document, naming
 * every route the gateway registers (but the static assets of HIDDEN_ROUTES), never a secret, served to people
 * signed in only, and docs/openapi.json is what `npm run docs:openapi` writes. Whether the routes answer what
 * they declare: openapi-conformance.test.ts.
 */

interface Document {
  openapi: string
  paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
  components: { schemas: Record<string, unknown> }
}

/** The app of docs/openapi.json, with every route it registered. */
const built = builtDocument<Document>()

test('the document is a valid OpenAPI 3.1 document', async () => {
  const { document } = await built
  assert.equal(document.openapi, '3.1.0')
  const validator = new Validator()
  const result = await validator.validate(document as unknown as Record<string, unknown>)
  assert.deepEqual(result.errors ?? [], [], 'not valid OpenAPI 3.1')
  assert.equal(result.valid, true)
  assert.equal(validator.version, '3.1')
})

test('every route the gateway registers is in the document, but the static assets', async () => {
  const { routes, document } = await built
  const missing: string[] = []
  const hidden: string[] = []
  for (const route of routes) {
    for (const method of [route.method].flat()) {
      // Fastify's HEAD twin of a GET answers the same without a body.
      if (method === 'HEAD') continue
      if (HIDDEN_ROUTES.has(route.url)) {
        hidden.push(route.url)
        continue
      }
      if (document.paths[openapiPath(route.url)]?.[method.toLowerCase()] === undefined)
        missing.push(`${method} ${route.url}`)
    }
  }
  assert.deepEqual(missing, [], 'registered, not in the document')
  assert.deepEqual(hidden.sort(), [...HIDDEN_ROUTES.keys()].sort(), 'a hidden route that no longer exists')
  for (const url of HIDDEN_ROUTES.keys()) assert.equal(document.paths[openapiPath(url)], undefined, url)
  // Nothing in the document that no route serves (a v1 path the table dropped, say).
  const served = new Set(routes.flatMap((r) => [r.method].flat().map((m) => `${m} ${openapiPath(r.url)}`)))
  const stale = Object.entries(document.paths).flatMap(([path, item]) =>
    Object.keys(item)
      .map((method) => `${method.toUpperCase()} ${path}`)
      .filter((operation) => !served.has(operation)),
  )
  assert.deepEqual(stale, [], 'in the document, served by no route')
})

test('docs/openapi.json is what npm run docs:openapi writes', async () => {
  assert.equal(
    await readFile(OPENAPI_JSON, 'utf8'),
    await openapiJson(),
    'docs/openapi.json is stale: run npm run docs:openapi',
  )
})

test('the document holds no secret of its configuration, and no example looks like a credential', async () => {
  const text = JSON.stringify((await built).document)
  for (const [name, value] of Object.entries(DOCUMENT_ENV))
    if (/SECRET|TOKEN|_KEY$/.test(name))
      assert.ok(!text.includes(value), `${name}'s value is in the document`)
  const examples: string[] = []
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) for (const item of node) walk(item)
    else if (node !== null && typeof node === 'object')
      for (const [key, value] of Object.entries(node)) {
        if (key === 'example' || key === 'examples') examples.push(JSON.stringify(value))
        walk(value)
      }
  }
  walk((await built).document)
  assert.ok(examples.length > 0, 'the walk found the examples')
  for (const example of examples)
    assert.doesNotMatch(example, /xox[abpe]-|eyJ[A-Za-z0-9_-]{8,}|Bearer |secret/i, example)
})

test("every object in the gateway's own answers declares additionalProperties (its serialiser drops the rest)", async () => {
  const { document } = await built
  const undeclared: string[] = []
  const walk = (node: unknown, where: string): void => {
    if (Array.isArray(node)) for (const [i, item] of node.entries()) walk(item, `${where}[${i}]`)
    else if (node !== null && typeof node === 'object') {
      const schema = node as Record<string, unknown>
      if (
        schema.properties !== undefined &&
        typeof schema.properties === 'object' &&
        !('additionalProperties' in schema)
      )
        undeclared.push(where)
      for (const [key, value] of Object.entries(schema)) walk(value, `${where}.${key}`)
    }
  }
  for (const [path, item] of Object.entries(document.paths)) {
    if (path.startsWith('/desktop/')) continue
    for (const [method, operation] of Object.entries(item)) walk(operation.responses, `${method} ${path}`)
  }
  walk(document.components.schemas, 'components')
  assert.deepEqual(undeclared, [])
})

test('the served document needs a person signed in (any role) and is the app’s document', async (t) => {
  const gw = await startGateway()
  t.after(() => gw.close())
  const url = `${gw.url}/api/openapi.json`
  const anonymous = await fetch(url)
  assert.equal(anonymous.status, 401)
  assert.equal(((await anonymous.json()) as { error: string }).error, 'unauthenticated')
  const viewer = await fetch(url, {
    headers: { authorization: `Bearer ${await bearer({ roles: ['viewer'], teams: ['blue'] })}` },
  })
  assert.equal(viewer.status, 200)
  assert.match(viewer.headers.get('content-type') ?? '', /^application\/json/)
  assert.deepEqual(await viewer.json(), structuredClone(gw.app.swagger()))
  const noRole = await fetch(url, { headers: { authorization: `Bearer ${await bearer({ roles: [] })}` } })
  assert.equal(noRole.status, 403)
})
