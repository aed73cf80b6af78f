/**
 * `npm run docs:openapi`: writes docs/openapi.json, the gateway's OpenAPI 3.1 document, from an app built with
 * a fixed configuration that registers every route (sign-in, the Slack app with Sign in with Slack, Kasm's
 * Developer API). Nothing listens and nothing is called: the identity provider, Slack and Kasm are only named.
 * test/docs/openapi.test.ts fails when the file is stale.
 */

import { writeFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { type AppOptions, buildApp } from '../src/app.ts'
import { loadConfig } from '../src/config.ts'

/** Where the document is written. */
export const OPENAPI_JSON = resolve(fileURLToPath(new URL('..', import.meta.url)), 'docs/openapi.json')

/**
 * The configuration the document is made with: every feature that adds routes, fixed values (the document
 * must not change from one run to the next), throwaway secrets that appear nowhere in it.
 */
export const DOCUMENT_ENV: Readonly<Record<string, string>> = {
  NODE_ENV: 'development',
  LOG_LEVEL: 'silent',
  GATEWAY_DEMO: 'off',
  GATEWAY_JWT_SECRET: 'docs-openapi-jwt-secret-0123456789abcdef',
  GATEWAY_COOKIE_SECRET: 'docs-openapi-cookie-secret-0123456789abcdef',
  GATEWAY_PUBLIC_ORIGIN: 'https://gateway.invalid',
  GATEWAY_OIDC_ISSUER: 'https://idp.invalid/',
  GATEWAY_OIDC_CLIENT_ID: 'krg-docs',
  GATEWAY_OIDC_CLIENT_SECRET: 'krg-docs-client-secret',
  GATEWAY_SLACK_BOT_TOKEN: 'xoxb-krg-docs',
  GATEWAY_SLACK_SIGNING_SECRET: 'krgdocssigningsecret0123',
  GATEWAY_SLACK_CLIENT_ID: '1234.5678',
  GATEWAY_SLACK_CLIENT_SECRET: 'krgdocsslackclientsecret',
  GATEWAY_SLACK_API_URL: 'http://127.0.0.1:9/api/',
  GATEWAY_TEAMS_APP_ID: '00000000-0000-4000-8000-000000000000',
  GATEWAY_TEAMS_APP_PASSWORD: 'krg-docs-teams-password',
  GATEWAY_TEAMS_TENANT_ID: '00000000-0000-4000-8000-000000000001',
  GATEWAY_TEAMS_OPENID_URL: 'http://127.0.0.1:9/v1/.well-known/openidconfiguration',
  GATEWAY_TEAMS_LOGIN_URL: 'http://127.0.0.1:9',
  GATEWAY_KASM_API_URL: 'http://127.0.0.1:9/',
  GATEWAY_UPSTREAM_TEMPLATE: 'http://127.0.0.1:9/{kasmId}/',
  GATEWAY_KASM_API_KEY: 'krg-docs-key',
  GATEWAY_KASM_API_SECRET: 'krg-docs-secret',
  GATEWAY_KASM_SYNC_S: '0',
}

/** An app of {@link DOCUMENT_ENV}, ready (not listening); `options` as buildApp takes them. */
export async function documentApp(options: AppOptions = {}): Promise<FastifyInstance> {
  const app = await buildApp(loadConfig({ ...DOCUMENT_ENV }), options)
  await app.ready()
  return app
}

/** The document as docs/openapi.json holds it: two-space JSON and a final newline. */
export async function openapiJson(): Promise<string> {
  const app = await documentApp()
  try {
    return `${JSON.stringify(app.swagger(), null, 2)}\n`
  } finally {
    await app.close()
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await writeFile(OPENAPI_JSON, await openapiJson())
  console.log('docs/openapi.json: written')
}
