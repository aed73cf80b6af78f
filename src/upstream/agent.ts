import { Agent, Dispatcher } from 'undici'
import type { Env } from '../config.ts'
import type { UrlPolicy } from './url-policy.ts'

/** The header that carries the messaging token upstream. Never in a URL. */
export const TOKEN_HEADER = 'x-kasm-runtime-session-token'

/**
 * Marks a request, between forward.ts and {@link TrustRouter}, as one for an upstream the URL policy must
 * check on connect. The router removes it: it never leaves the process.
 */
export const GUARDED_HEADER = 'x-krg-guarded-upstream'

/**
 * Carries, between forward.ts and {@link TrustRouter}, the exact request target of a URL that the path guard
 * of @fastify/reply-from would refuse although it is no traversal (`paths.ts`, `proxyRefuses`): the router
 * sends that path instead of the one reply-from built. The router removes it: it never leaves the process.
 */
export const TARGET_HEADER = 'x-krg-request-target'

function agentOptions(env: Env): Agent.Options {
  return {
    headersTimeout: env.GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS,
    bodyTimeout: 0,
    connections: env.GATEWAY_UPSTREAM_CONNECTIONS,
    keepAliveTimeout: 10_000,
  }
}

/**
 * One pooled keep-alive agent for the runtimes of the deployer's own configuration (sessions file,
 * template). Connect and header timeouts are bounded; the body timeout is off because event streams,
 * attachments and artifacts are long-lived streams (undici's default 300 s would cut SSE); stalled streams
 * are detected by their own idle timers instead.
 */
export function createUpstreamAgent(env: Env): Agent {
  return new Agent({ ...agentOptions(env), connect: { timeout: env.GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS } })
}

/**
 * The agent of upstreams someone other than the deployer chose (the admin API): the same pool settings, but
 * every connection is checked against the URL policy after DNS, so a name rebound to a refused address fails
 * the connection instead of reaching it.
 */
export function createGuardedAgent(env: Env, policy: UrlPolicy): Agent {
  return new Agent({
    ...agentOptions(env),
    connect: policy.connector({ timeout: env.GATEWAY_UPSTREAM_CONNECT_TIMEOUT_MS }),
  })
}

/**
 * One dispatcher for @fastify/reply-from over both agents (reply-from takes one for all requests): a request
 * marked with {@link GUARDED_HEADER} goes through the guarded agent, everything else through the trusted one;
 * one with {@link TARGET_HEADER} is sent to that request target. Both headers are removed.
 */
export class TrustRouter extends Dispatcher {
  readonly trusted: Dispatcher
  readonly guarded: Dispatcher

  constructor(trusted: Dispatcher, guarded: Dispatcher) {
    super()
    this.trusted = trusted
    this.guarded = guarded
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const headers = options.headers as Record<string, string | string[] | undefined> | undefined
    if (
      headers === undefined ||
      headers === null ||
      Array.isArray(headers) ||
      !(GUARDED_HEADER in headers || TARGET_HEADER in headers)
    ) {
      return this.trusted.dispatch(options, handler)
    }
    const { [GUARDED_HEADER]: guarded, [TARGET_HEADER]: target, ...rest } = headers
    const routed = { ...options, headers: rest as Record<string, string> }
    if (typeof target === 'string') routed.path = target
    return (guarded === undefined ? this.trusted : this.guarded).dispatch(routed, handler)
  }

  override close(): Promise<void>
  override close(callback: () => void): void
  override close(callback?: () => void): Promise<void> | void {
    const done = Promise.all([this.trusted.close(), this.guarded.close()]).then(() => {})
    if (callback === undefined) return done
    void done.then(callback, callback)
  }

  override destroy(): Promise<void>
  override destroy(err: Error | null): Promise<void>
  override destroy(callback: () => void): void
  override destroy(err: Error | null, callback: () => void): void
  override destroy(a?: Error | null | (() => void), b?: () => void): Promise<void> | void {
    const err = typeof a === 'function' ? null : (a ?? null)
    const callback = typeof a === 'function' ? a : b
    const done = Promise.all([this.trusted.destroy(err), this.guarded.destroy(err)]).then(() => {})
    if (callback === undefined) return done
    void done.then(callback, callback)
  }
}
