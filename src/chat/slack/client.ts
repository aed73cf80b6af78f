import { type Logger, LogLevel, WebClient } from '@slack/web-api'
import type { FastifyBaseLogger } from 'fastify'
import type { Env } from '../../config.ts'
import { serviceName, version } from '../../version.ts'

// Loaded only when GATEWAY_SLACK_BOT_TOKEN is set (src/chat/plugin.ts): the SDK costs every other boot, and
// every test process, a third of a second.

/**
 * The Slack SDKs' logs into the gateway's (pino). Their debug lines carry whole payloads (a modal's answers,
 * user ids) and are dropped, their info lines become debug, warnings and errors stay what they are; each
 * line is one message string, never an object that could hold a token.
 */
export function slackLogger(log: FastifyBaseLogger): Logger {
  const line = (parts: unknown[]): string =>
    parts
      .map((p) => (p instanceof Error ? p.message : String(p)))
      .join(' ')
      .slice(0, 500)
  return {
    debug: () => {},
    info: (...parts) => log.debug({ slack: line(parts) }, 'slack sdk'),
    warn: (...parts) => log.warn({ slack: line(parts) }, 'slack sdk'),
    error: (...parts) => log.error({ slack: line(parts) }, 'slack sdk'),
    setLevel: () => {},
    getLevel: () => LogLevel.INFO,
    setName: () => {},
  }
}

/**
 * The Web API client (`@slack/web-api`) the adapter calls, at GATEWAY_SLACK_API_URL. Each call gives up after
 * GATEWAY_NOTIFY_TIMEOUT_MS; failed calls (network, 5xx, 429 with Retry-After) are retried by the SDK with
 * exponential backoff from GATEWAY_NOTIFY_RETRY_MS for at most GATEWAY_NOTIFY_RETRY_FOR_S, like webhooks.
 */
export function slackClient(env: Env, log: FastifyBaseLogger, retries = true): WebClient {
  return new WebClient(env.GATEWAY_SLACK_BOT_TOKEN, {
    slackApiUrl: env.GATEWAY_SLACK_API_URL,
    logger: slackLogger(log),
    timeout: env.GATEWAY_NOTIFY_TIMEOUT_MS,
    headers: { 'user-agent': `${serviceName}/${version}` },
    retryConfig: retries
      ? {
          retries: 8,
          factor: 2,
          minTimeout: env.GATEWAY_NOTIFY_RETRY_MS,
          maxTimeout: 5 * 60_000,
          randomize: true,
          maxRetryTime: env.GATEWAY_NOTIFY_RETRY_FOR_S * 1000,
        }
      : { retries: 0 },
  })
}
