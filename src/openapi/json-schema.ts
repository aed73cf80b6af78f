import { z } from 'zod'

/** A JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1), as plain data. */
export type JsonSchema = { [keyword: string]: unknown }

/**
 * The JSON Schema of what a zod (v3) schema accepts as INPUT: what a client may send, so that the document
 * and the check are one source (a route documents the very schema it parses with, see zod-input.ts).
 *
 * Only what the gateway's route schemas are made of is converted; anything else throws, so a new kind of
 * schema fails the build of the document (and test/docs/openapi-input.test.ts) instead of being described
 * wrongly. What JSON Schema cannot say (a `refine`, a `transform`'s rule, `trim` before `min`) is left to the
 * schema's `.describe()`, which becomes the `description`: the document is never narrower than the check,
 * it may be wider where the check is code (the same test proves both on real inputs).
 *
 * Why not a package: zod-to-json-schema (the converter for zod v3) is not installed here and is deprecated
 * upstream in favour of zod 4's own `z.toJSONSchema`; moving these schemas to zod 4 changes every message
 * a refusal quotes. This function is the one place to swap when either happens.
 */
export function jsonSchemaOf(schema: z.ZodTypeAny): JsonSchema {
  const converted = convert(schema)
  return schema.description === undefined ? converted : { ...converted, description: schema.description }
}

function convert(schema: z.ZodTypeAny): JsonSchema {
  if (schema instanceof z.ZodObject) return object(schema)
  if (schema instanceof z.ZodString) return string(schema)
  if (schema instanceof z.ZodNumber) return number(schema)
  if (schema instanceof z.ZodBoolean) return { type: 'boolean' }
  if (schema instanceof z.ZodEnum) return { type: 'string', enum: [...(schema.options as string[])] }
  if (schema instanceof z.ZodLiteral) return { const: schema.value }
  if (schema instanceof z.ZodArray) return array(schema)
  if (schema instanceof z.ZodRecord)
    return {
      type: 'object',
      propertyNames: jsonSchemaOf(schema.keySchema),
      additionalProperties: jsonSchemaOf(schema.valueSchema),
    }
  if (schema instanceof z.ZodUnion)
    return { anyOf: (schema.options as z.ZodTypeAny[]).map((option) => jsonSchemaOf(option)) }
  if (schema instanceof z.ZodNullable) return { anyOf: [jsonSchemaOf(schema.unwrap()), { type: 'null' }] }
  if (schema instanceof z.ZodOptional) return jsonSchemaOf(schema.unwrap())
  if (schema instanceof z.ZodDefault)
    return { ...jsonSchemaOf(schema.removeDefault()), default: schema._def.defaultValue() }
  // A refine or a transform checks its input with the schema inside first: that one is what may be sent.
  if (schema instanceof z.ZodEffects) return jsonSchemaOf(schema.innerType())
  if (schema instanceof z.ZodUnknown || schema instanceof z.ZodAny) return {}
  throw new TypeError(`no JSON Schema for a zod ${schema._def.typeName ?? schema.constructor.name}`)
}

function object(schema: z.AnyZodObject): JsonSchema {
  const properties: Record<string, JsonSchema> = {}
  const required: string[] = []
  for (const [key, value] of Object.entries(schema.shape as z.ZodRawShape)) {
    properties[key] = jsonSchemaOf(value)
    // An optional or defaulted property may be left out; isOptional() says whether undefined passes.
    if (!value.isOptional()) required.push(key)
  }
  const { unknownKeys, catchall } = schema._def
  // A strict object refuses unknown keys; one that strips them (zod's default) accepts them.
  const additional = catchall instanceof z.ZodNever ? unknownKeys !== 'strict' : jsonSchemaOf(catchall)
  return {
    type: 'object',
    properties,
    ...(required.length === 0 ? {} : { required }),
    additionalProperties: additional,
  }
}

function string(schema: z.ZodString): JsonSchema {
  const out: JsonSchema = { type: 'string' }
  for (const check of schema._def.checks) {
    if (check.kind === 'min') out.minLength = check.value
    else if (check.kind === 'max') out.maxLength = check.value
    else if (check.kind === 'length') {
      out.minLength = check.value
      out.maxLength = check.value
    } else if (check.kind === 'regex') {
      if (out.pattern !== undefined) throw new TypeError('no JSON Schema for a zod string of two patterns')
      if (check.regex.flags !== '') throw new TypeError('no JSON Schema for a zod pattern with flags')
      out.pattern = check.regex.source
    }
    // `trim` changes the value, it refuses nothing: the document says what may be sent before it.
    else if (check.kind !== 'trim') throw new TypeError(`no JSON Schema for a zod string's ${check.kind}`)
  }
  return out
}

function number(schema: z.ZodNumber): JsonSchema {
  // `z.coerce.number()` takes text too: right for a query string (OpenAPI writes the number in it), which is
  // the only place the routes coerce; a JSON body's coerced number would be documented narrower than it is.
  const out: JsonSchema = { type: 'number' }
  for (const check of schema._def.checks) {
    if (check.kind === 'int') out.type = 'integer'
    else if (check.kind === 'min') out[check.inclusive ? 'minimum' : 'exclusiveMinimum'] = check.value
    else if (check.kind === 'max') out[check.inclusive ? 'maximum' : 'exclusiveMaximum'] = check.value
    else if (check.kind === 'multipleOf') out.multipleOf = check.value
    else if (check.kind !== 'finite')
      throw new TypeError(`no JSON Schema for a zod number's ${(check as { kind: string }).kind}`)
  }
  return out
}

function array(schema: z.ZodArray<z.ZodTypeAny>): JsonSchema {
  const { minLength, maxLength, exactLength } = schema._def
  return {
    type: 'array',
    items: jsonSchemaOf(schema.element),
    ...(minLength === null ? {} : { minItems: minLength.value }),
    ...(maxLength === null ? {} : { maxItems: maxLength.value }),
    ...(exactLength === null ? {} : { minItems: exactLength.value, maxItems: exactLength.value }),
  }
}
