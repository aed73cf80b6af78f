import { SocketModeClient } from '@slack/socket-mode'
import type { FastifyBaseLogger } from 'fastify'
import { slackLogger } from './client.ts'
import type { Handled } from './interactions.ts'
import type { SlackMetrics } from './metrics.ts'

/** What {@link SlackSocketMode} works with. */
export interface SlackSocketModeOptions {
  /** GATEWAY_SLACK_APP_TOKEN (`xapp-`, with `connections:write`). */
  readonly appToken: string
  /** GATEWAY_SLACK_API_URL: where `apps.connections.open` is asked for the WebSocket's URL. */
  readonly apiUrl: string
  readonly handle: (payload: unknown) => Promise<Handled>
  readonly metrics: SlackMetrics
  readonly log: FastifyBaseLogger
}

/** The first reconnection waits this long, doubling (with jitter) up to {@link MAX_RETRY_MS}. */
const FIRST_RETRY_MS = 500
const MAX_RETRY_MS = 60_000

/**
 * Slack's Socket Mode with the official SDK (`@slack/socket-mode` 3, whose WebSocket is undici's, so it runs
 * on Node 20 without a flag): no inbound URL, what a gateway inside a private network needs. Each replica
 * holds its own connection and Slack spreads interactions over them; each is acknowledged on the socket as
 * soon as it is handled, and its follow-up runs after.
 *
 * The SDK's own reconnection is off: a reconnection that fails to reach Slack's API rejects a promise nobody
 * holds, which would end the process (unhandled rejections are fatal here). Every drop (Slack's regular
 * `disconnect`, a lost connection, a missed ping) is followed here by a new connection after a backoff
 * (0.5 s, doubling up to a minute, with jitter), until the app closes.
 */
export class SlackSocketMode {
  readonly #o: SlackSocketModeOptions
  readonly #client: SocketModeClient
  #timer: NodeJS.Timeout | null = null
  #failures = 0
  #closed = false
  #connected = false

  constructor(options: SlackSocketModeOptions) {
    this.#o = options
    this.#client = new SocketModeClient({
      appToken: options.appToken,
      logger: slackLogger(options.log),
      autoReconnectEnabled: false,
      // The connection is opened again here, so apps.connections.open is not retried by the SDK either.
      clientOptions: { slackApiUrl: options.apiUrl, retryConfig: { retries: 0 } },
    })
    this.#client.on('slack_event', (event: SocketEvent) => void this.#event(event))
    this.#client.on('connected', () => {
      this.#failures = 0
      this.#set(true)
      options.log.info('slack: socket mode connected')
    })
    this.#client.on('disconnected', () => {
      this.#set(false)
      this.#again()
    })
  }

  /** Whether the connection is open now. */
  get connected(): boolean {
    return this.#connected
  }

  /** Connects (in the background: the boot does not wait for Slack), and keeps connecting. */
  start(): void {
    this.#closed = false
    this.#connect()
  }

  async close(): Promise<void> {
    this.#closed = true
    if (this.#timer !== null) clearTimeout(this.#timer)
    this.#timer = null
    await this.#client.disconnect().catch(() => {})
    this.#set(false)
  }

  #connect(): void {
    this.#client.start().catch((err: unknown) => {
      this.#o.log.warn(
        { error: (err as Error)?.message },
        'slack: socket mode could not connect; trying again',
      )
      this.#again()
    })
  }

  /** One reconnection at a time, after the backoff. */
  #again(): void {
    if (this.#closed || this.#timer !== null) return
    const exp = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** this.#failures)
    this.#failures++
    const delay = Math.round(exp / 2 + Math.random() * (exp / 2))
    this.#timer = setTimeout(() => {
      this.#timer = null
      if (!this.#closed) this.#connect()
    }, delay)
    this.#timer.unref()
  }

  #set(connected: boolean): void {
    this.#connected = connected
    this.#o.metrics.socketConnected.set(connected ? 1 : 0)
  }

  async #event(event: SocketEvent): Promise<void> {
    let handled: Handled = {}
    try {
      if (event.type === 'interactive') handled = await this.#o.handle(event.body)
      await event.ack(handled.ack)
    } catch (err) {
      this.#o.log.warn(
        { error: (err as Error)?.message, type: event.type },
        'slack: socket mode event failed',
      )
      return
    }
    handled.after?.().catch((err: unknown) => this.#o.log.error({ err }, 'slack: interaction failed'))
  }
}

/** What the SDK emits as `slack_event`. */
interface SocketEvent {
  readonly type: string
  readonly body: unknown
  readonly ack: (response?: Record<string, unknown>) => Promise<void>
}
