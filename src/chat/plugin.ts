import fp from 'fastify-plugin'
import { LoginAttempts } from '../auth/oidc/login-attempts.ts'
import { ChatLinkFlow } from '../identity/link-flow.ts'
import type { ChatAdapter } from './adapter.ts'
import { ChatAnswers } from './answers.ts'
import { ChatClaims } from './claims.ts'
import { RuntimeReads } from './runtime-reads.ts'
import type { SeenKeys } from './seen-keys.ts'
import { SlackAdapter } from './slack/adapter.ts'
import { slackClient } from './slack/client.ts'
import { SlackInteractions } from './slack/interactions.ts'
import { SlackLinkCodes } from './slack/link-codes.ts'
import { SlackMessages } from './slack/messages.ts'
import { createSlackMetrics, type SlackMetrics } from './slack/metrics.ts'
import { SlackSignIn, slackOidcClient } from './slack/sign-in.ts'
import { SlackSocketMode } from './slack/socket-mode.ts'

/** The Slack app's parts the routes use. */
export interface SlackApp {
  readonly adapter: SlackAdapter
  readonly metrics: SlackMetrics
  /** Signed requests seen (a replay is refused). */
  readonly seen: SeenKeys
  /** Sign in with Slack, when GATEWAY_SLACK_CLIENT_ID/_SECRET are set. */
  readonly signIn: SlackSignIn | null
  /** Without it, the codes that prove a Slack account (a direct message to its user). */
  readonly linkCodes: SlackLinkCodes
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The chat adapter attention routing posts through (src/chat); null when none is configured. */
    chat: ChatAdapter | null
    /** The Slack app (src/chat/slack); null without GATEWAY_SLACK_BOT_TOKEN. */
    slack: SlackApp | null
    /** Linking chat accounts to people (src/identity/link-flow.ts); null without a chat adapter. */
    chatLinking: ChatLinkFlow | null
  }
}

/**
 * Chat adapters: with GATEWAY_SLACK_BOT_TOKEN, the Slack app. Its messages are posted by attention routing
 * (the notify plugin hands it the teams' Slack channels); its interactions come through the Request URL
 * (routes/slack.ts, with GATEWAY_SLACK_SIGNING_SECRET) and/or Socket Mode (GATEWAY_SLACK_APP_TOKEN), each
 * replica connected; answers go through chat/answers.ts; accounts are linked through the identity module.
 */
export const chatPlugin = fp(
  async (app) => {
    const { config } = app
    const env = config.env
    if (env.GATEWAY_SLACK_BOT_TOKEN === undefined || app.people.links === null) {
      app.decorate('chat', null)
      app.decorate('slack', null)
      app.decorate('chatLinking', null)
      return
    }
    const log = app.log.child({ component: 'slack' })
    if (env.GATEWAY_NOTIFY_FILE === undefined)
      log.warn('GATEWAY_SLACK_BOT_TOKEN is set but GATEWAY_NOTIFY_FILE is not: no channel gets a message')
    const metrics = createSlackMetrics(app.metrics.registry)
    const base = `${env.GATEWAY_PUBLIC_ORIGIN ?? ''}${config.basePath}`
    const reads = new RuntimeReads({
      dispatcherFor: app.upstream.dispatcherFor,
      onTokenEcho: (session) => {
        app.upstream.tokenEchoes.inc({ where: 'body' })
        log.warn({ kasmId: session.kasmId }, 'session runtime echoed its token; masked')
      },
      timeoutMs: env.GATEWAY_UPSTREAM_HEADERS_TIMEOUT_MS,
      log,
    })
    const answers = new ChatAnswers(app, app.people, log)
    const store = app.stores.chatMessages()
    const seen = app.stores.seenKeys()
    const signingSecret = env.GATEWAY_SLACK_SIGNING_SECRET ?? null
    const messages = new SlackMessages({
      web: slackClient(env, log),
      messages: store,
      reads,
      sessions: app.sessions,
      answers,
      answerable: signingSecret !== null || env.GATEWAY_SLACK_APP_TOKEN !== undefined,
      claimTtlS: env.GATEWAY_CLAIM_TTL_S,
      log,
    })
    const linking = new ChatLinkFlow(app, {
      links: app.people.links,
      store: app.stores.loginAttempts,
      sealer: app.stores.sealer,
      seen,
      confirmPath: `${config.basePath}auth/slack-link/confirm`,
    })
    // A trigger lives three seconds and an ephemeral answers a click: no retries that outlast either.
    const quick = slackClient(env, log, false)
    const linkCodes = new SlackLinkCodes({ web: quick, flow: linking, audit: app.audit, metrics, log })
    const interactions = new SlackInteractions({
      web: quick,
      answers,
      claims: new ChatClaims(app, log),
      people: app.people,
      messages: store,
      slackMessages: messages,
      reads,
      sessions: app.sessions,
      metrics,
      linkCodes,
      base,
      log,
    })
    const socketMode =
      env.GATEWAY_SLACK_APP_TOKEN === undefined
        ? null
        : new SlackSocketMode({
            appToken: env.GATEWAY_SLACK_APP_TOKEN,
            apiUrl: env.GATEWAY_SLACK_API_URL,
            handle: (payload) => interactions.handle(payload, {}),
            metrics,
            log,
          })
    const adapter = new SlackAdapter({ messages, interactions, signingSecret, socketMode })
    const slackOidc = slackOidcClient(config)
    const signIn =
      slackOidc === null
        ? null
        : new SlackSignIn(slackOidc, new LoginAttempts(app.stores.loginAttempts, app.stores.sealer))
    app.decorate('chat', adapter)
    app.decorate('slack', { adapter, metrics, seen, signIn, linkCodes })
    app.decorate('chatLinking', linking)
    app.addHook('onReady', () => adapter.start())
    app.addHook('preClose', () => adapter.close())
  },
  {
    name: 'chat',
    dependencies: ['auth', 'sessions', 'upstream', 'audit', 'stores', 'metrics', 'overview'],
  },
)
