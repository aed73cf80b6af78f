import { Agent } from 'undici'
import type { Env } from '../config.ts'

/** The header that carries the messaging token upstream. Never in a URL. */
export const TOKEN_HEADER = 'x-kasm-runtime-session-token'

/**
 * One pooled keep-alive agent for every runtime. Connect and header timeouts are bounded; the body timeout
 * is off because event streams, attachments and artifacts are long-lived streams (undici's default 300 s
 * would cut SSE); stalled streams are detected by their own idle timers instead.
 */
export function createUpstreamAgent(env: Env): Agent {
  return new Agent({
    connect: { timeout: env.GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS },
    headersTimeout: env.GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS,
    bodyTimeout: 0,
    connections: env.GATEWAY_UPSTREAM_CONNECTIONS,
    keepAliveTimeout: 10_000,
  })
}
