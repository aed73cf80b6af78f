import { hostname } from 'node:os'
import type { FastifyServerOptions } from 'fastify'
import { type DestinationStream, stdTimeFunctions } from 'pino'
import type { Config } from './config.ts'
import { serviceName, version } from './version.ts'

/**
 * Paths pino replaces with `[redacted]` wherever they appear in a log record. The messaging token is also
 * unloggable by construction (see sessions/secret.ts); these cover credentials that arrive from clients.
 */
export const redactPaths: string[] = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-kasm-runtime-session-token"]',
  'req.query.token',
  'req.query.kasm_runtime_token',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  'headers["x-kasm-runtime-session-token"]',
  'messagingToken',
  '*.messagingToken',
  'token',
  '*.token',
]

/**
 * Logger options for the app: JSON lines with an ISO-8601 `time` and the `service` and `version` of the
 * process on every line (a shared log index tells services and rollouts apart), credentials redacted, URLs
 * logged without their query. Written to stdout, or to `destination` (the demo's readable lines).
 */
export function loggerOptions(
  config: Config,
  destination?: DestinationStream,
): FastifyServerOptions['logger'] {
  return {
    level: config.env.LOG_LEVEL,
    ...(destination === undefined ? {} : { stream: destination }),
    timestamp: stdTimeFunctions.isoTime,
    base: { service: serviceName, version, pid: process.pid, hostname: hostname() },
    redact: { paths: redactPaths, censor: '[redacted]' },
    serializers: {
      req: (req: { method: string; url: string; id: string }) => ({
        method: req.method,
        // A query can carry a token (`?token=`, `?kasm_runtime_token=`): log the path only.
        url: req.url.split('?')[0],
        id: req.id,
      }),
    },
  }
}
