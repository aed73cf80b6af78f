import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.ts'
import { loadConfig } from '../../src/config.ts'
import { testEnv } from './jwt.ts'

/** A gateway listening on 127.0.0.1 port 0. `close` in `t.after`. */
export interface TestGateway {
  app: FastifyInstance
  /** e.g. `http://127.0.0.1:41234` (no trailing slash). */
  url: string
  close(): Promise<void>
}

/**
 * Starts a real gateway on port 0 with {@link testEnv} plus overrides. Pass `logger` (e.g. a pino
 * destination over a stream you read) to assert on log lines.
 */
export async function startGateway(
  overrides: Record<string, string> = {},
  opts: {
    logger?: Parameters<typeof buildApp>[1] extends infer O
      ? O extends { logger?: infer L }
        ? L
        : never
      : never
  } = {},
): Promise<TestGateway> {
  const config = loadConfig(testEnv(overrides))
  const app = await buildApp(config, opts.logger === undefined ? {} : { logger: opts.logger })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return { app, url: `http://127.0.0.1:${address.port}`, close: () => app.close() }
}
