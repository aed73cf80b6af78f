import type { RouteOptions } from 'fastify'
import { documentApp } from '../../scripts/docs-openapi.ts'

/**
 * The app of docs/openapi.json, built once and closed: every route it registered and its document (`D`: as
 * much of the document's shape as a test reads).
 */
export async function builtDocument<D>(): Promise<{ routes: RouteOptions[]; document: D }> {
  const routes: RouteOptions[] = []
  const app = await documentApp({ onRoute: (route) => void routes.push(route) })
  try {
    return { routes, document: structuredClone(app.swagger()) as unknown as D }
  } finally {
    await app.close()
  }
}

/** The OpenAPI path of a Fastify URL: `:name` → `{name}`, a final `*` (the artifacts' file) → `{path}`. */
export function openapiPath(url: string): string {
  return url.replace(/:([A-Za-z]+)/g, '{$1}').replace(/\*$/, '{path}')
}
