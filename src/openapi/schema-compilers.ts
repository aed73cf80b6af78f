import AjvCompiler from '@fastify/ajv-compiler'
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler'
import type { FastifyServerOptions } from 'fastify'

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>
type BuildValidator = NonNullable<CompilersFactory['buildValidator']>
type BuildSerializer = NonNullable<CompilersFactory['buildSerializer']>
type Validator = ReturnType<ReturnType<BuildValidator>>
type Serializer = ReturnType<ReturnType<BuildSerializer>>

/**
 * Fastify's own schema compilers (Ajv validators, fast-json-stringify serialisers), each schema compiled once per
 * process. Fastify compiles a schema for every route, status and content type that names it: the gateway's routes
 * ask for about 300 compilations of 40 distinct schemas (every route declares the same error answer, for `4xx`
 * and `5xx`, as JSON and as a page), and a process that builds the gateway again (the tests build hundreds) would
 * compile them all again. A compiled schema is a pure function of the schema, the shared schemas (`addSchema`)
 * and the compiler's options, which together are its key.
 */
export const schemaCompilers: CompilersFactory = {
  buildValidator: cachedValidators(AjvCompiler()),
  buildSerializer: cachedSerializers(SerializerSelector()),
}

function cachedValidators(build: BuildValidator): BuildValidator {
  // The pool answers the same compiler for the same shared schemas and options: one cache per compiler.
  const caches = new WeakMap<object, Map<string, Validator>>()
  return (externalSchemas, options) => {
    const compile = build(externalSchemas, options)
    const compiled = caches.get(compile) ?? new Map<string, Validator>()
    caches.set(compile, compiled)
    return memoised(compile, compiled)
  }
}

function cachedSerializers(build: BuildSerializer): BuildSerializer {
  const caches = new Map<string, Map<string, Serializer>>()
  return (externalSchemas, options) => {
    const key = JSON.stringify([externalSchemas, options])
    const compiled = caches.get(key) ?? new Map<string, Serializer>()
    caches.set(key, compiled)
    return memoised(build(externalSchemas, options), compiled)
  }
}

/** `compile`, answering from `compiled` (by the schema's text) what it compiled before. */
function memoised<R extends { schema?: unknown }, F>(
  compile: (route: R) => F,
  compiled: Map<string, F>,
): (route: R) => F {
  return (route) => {
    const key = JSON.stringify(route.schema)
    const known = compiled.get(key)
    if (known !== undefined) return known
    const made = compile(route)
    compiled.set(key, made)
    return made
  }
}
