import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { FastifyReply } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { schemaCompilers } from '../../src/openapi/schema-compilers.ts'
import { ERROR_ANSWER } from '../../src/openapi/schemas.ts'
import { testEnv } from '../helpers/jwt.ts'

const route = (schema: object) => ({ schema, method: 'GET', url: '/x', httpPart: 'body', httpStatus: '200' })
const answer = () => ({
  type: 'object',
  properties: { status: { type: 'string' } },
  required: ['status'],
  additionalProperties: false,
})

test('a schema is compiled once per process: the same text, from any object, gets the same function', () => {
  const serializers = schemaCompilers.buildSerializer?.({}, {})
  assert.ok(serializers)
  const serialize = serializers(route(answer()) as never) as (value: unknown) => string
  assert.equal(serializers(route(answer()) as never), serialize)
  assert.equal(schemaCompilers.buildSerializer?.({}, {})(route(answer()) as never), serialize)
  // What it compiled is fast-json-stringify's serialiser of that schema: undeclared properties are dropped.
  assert.equal(serialize({ status: 'ok', token: 'secret' }), '{"status":"ok"}')

  const validators = schemaCompilers.buildValidator?.({}, { customOptions: {} } as never)
  assert.ok(validators)
  const validate = validators(route(answer()) as never) as (value: unknown) => boolean
  assert.equal(validators(route(answer()) as never), validate)
  assert.equal(validate({ status: 'ok' }), true)
  assert.equal(validate({}), false)
})

test('another schema, or other shared schemas, compile anew', () => {
  const serializers = schemaCompilers.buildSerializer?.({}, {})
  assert.ok(serializers)
  const one = serializers(route(answer()) as never)
  const other = serializers(route({ ...answer(), required: [] }) as never) as (value: unknown) => string
  assert.notEqual(other, one)
  assert.equal(other({}), '{}')
  // A `$ref` means what the shared schemas say: with other shared schemas it is another serialiser.
  const withShared = schemaCompilers.buildSerializer?.({ ErrorAnswer: ERROR_ANSWER }, {})
  assert.ok(withShared)
  assert.notEqual(withShared(route(answer()) as never), one)

  const validators = schemaCompilers.buildValidator?.({}, { customOptions: {} } as never)
  const coercing = schemaCompilers.buildValidator?.({}, { customOptions: { coerceTypes: false } } as never)
  assert.ok(validators && coercing)
  assert.notEqual(coercing(route(answer()) as never), validators(route(answer()) as never))
})

test('two gateways built in one process serialise a route with the same function', async (t) => {
  const seen: unknown[] = []
  for (let i = 0; i < 2; i++) {
    const app = await buildApp(loadConfig(testEnv()), {
      onRoute: (options) => {
        if (options.url !== '/healthz') return
        options.onSend = (_request, reply: FastifyReply, payload, done) => {
          seen.push(reply.getSerializationFunction('200'))
          done(null, payload)
        }
      },
    })
    t.after(() => app.close())
    const res = await app.inject('/healthz')
    assert.equal(res.statusCode, 200)
    assert.deepEqual(res.json(), { status: 'ok' })
  }
  assert.equal(seen.length, 2)
  assert.equal(typeof seen[0], 'function')
  assert.equal(seen[1], seen[0])
})
