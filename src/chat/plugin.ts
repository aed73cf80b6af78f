import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { LoginAttempts } from '../auth/oidc/login-attempts.ts'
import { ChatLinkFlow } from '../identity/link-flow.ts'
import type { ChatAdapter } from './adapter.ts'
import { ChatAdapters } from './adapters.ts'
import { ChatAnswers } from './answers.ts'
import { ChatClaims } from './claims.ts'
import type { ChatMessageStore } from './messages.ts'
import { TeamsAdapter } from './msteams/adapter.ts'
import { EntraMatch } from './msteams/entra.ts'
import { TeamsInvoke } from './msteams/invoke.ts'
import { TeamsLinkCodes } from './msteams/link-codes.ts'
import { TeamsMessages } from './msteams/messages.ts'
import { RuntimeReads } from './runtime-reads.ts'
import type { SeenKeys } from './seen-keys.ts'
import { SlackAdapter } from './slack/adapter.ts'
import { SlackInteractions } from './slack/interactions.ts'
import { SlackLinkCodes } from './slack/link-codes.ts'
import { SlackMessages } from './slack/messages.ts'
import { createSlackMetrics, type SlackMetrics } from './slack/metrics.ts'
import { SlackSignIn, slackOidcClient } from './slack/sign-in.ts'

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
    /** The chat adapters attention routing posts through, one per kind (src/chat); null when none is configured. */
    chat: ChatAdapters | null
    /** The Slack app (src/chat/slack); null without GATEWAY_SLACK_BOT_TOKEN. */
    slack: SlackApp | null
    /** The Teams adapter and its Entra match (src/chat/msteams); null without GATEWAY_TEAMS_APP_ID. */
    teamsChat: TeamsChat | null
    /** Linking chat accounts to people (src/identity/link-flow.ts); null without a chat adapter. */
    chatLinking: ChatLinkFlow | null
  }
}

/** The Teams adapter's parts the routes use. */
export interface TeamsChat {
  readonly adapter: TeamsAdapter
  /** Records a sign-in's Entra account as the person's Teams account (see EntraMatch). */
  readonly entra: EntraMatch
}

/**
 * Chat adapters, one per kind: with GATEWAY_SLACK_BOT_TOKEN the Slack app, with GATEWAY_TEAMS_APP_ID the Teams
 * bot (its transport is the msteams plugin's). Their messages are posted by attention routing (the notify
 * plugin hands each target's job to the adapter of its kind); Slack's interactions come through the Request
 * URL (routes/slack.ts) and/or Socket Mode, Teams' invokes through the messaging endpoint (routes/msteams.ts);
 * answers go through chat/answers.ts; accounts are linked through the identity module, the codes sent by the
 * adapter of the account's chat.
 */
export const chatPlugin = fp(
  async (app) => {
    const { config } = app
    const env = config.env
    const slackOn = env.GATEWAY_SLACK_BOT_TOKEN !== undefined
    const teams = app.msteams
    const links = app.people.links
    if ((!slackOn && teams === null) || links === null) {
      app.decorate('chat', null)
      app.decorate('slack', null)
      app.decorate('teamsChat', null)
      app.decorate('chatLinking', null)
      return
    }
    const log = app.log.child({ component: 'chat' })
    if (env.GATEWAY_NOTIFY_FILE === undefined)
      log.warn('a chat adapter is configured but GATEWAY_NOTIFY_FILE is not: no channel gets a message')
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
    const claims = new ChatClaims(app, log)
    const store = app.stores.chatMessages()
    const seen = app.stores.seenKeys()
    const linking = new ChatLinkFlow(app, {
      links,
      store: app.stores.loginAttempts,
      sealer: app.stores.sealer,
      seen,
      confirmPath: `${config.basePath}auth/slack-link/confirm`,
    })
    const adapters: ChatAdapter[] = []
    const slack = slackOn ? await slackApp(app, { reads, answers, claims, store, seen, linking, base }) : null
    if (slack !== null) adapters.push(slack.adapter)
    let teamsChat: TeamsChat | null = null
    if (teams !== null) {
      const tlog = app.log.child({ component: 'msteams' })
      const messages = new TeamsMessages({
        connector: teams.connector,
        messages: store,
        reads,
        sessions: app.sessions,
        answers,
        placeOf: (job) => (job.target.chat === 'msteams' ? job.target : null),
        claimTtlS: env.GATEWAY_CLAIM_TTL_S,
        personalServiceUrl: async () => (await teams.installations.list())[0]?.serviceUrl ?? null,
        log: tlog,
      })
      const linkCodes = new TeamsLinkCodes({
        connector: teams.connector,
        flow: linking,
        audit: app.audit,
        log: tlog,
      })
      linking.setCodeSender('msteams', linkCodes)
      const invoke = new TeamsInvoke({
        answers,
        claims,
        people: app.people,
        messages: store,
        reads,
        sessions: app.sessions,
        linkCodes,
        answered: (q) => messages.answered(q.kasmId, q.run, q.requestId),
        base,
        // The invoke's outcome is its activity's: counted once, when known (an answer may outlast the invoke).
        count: (_verb, outcome) => teams.metrics.activities.inc({ type: 'invoke', outcome }),
        log: tlog,
      })
      teams.setInvokeHandler((activity) => invoke.handle(activity))
      const adapter = new TeamsAdapter({ messages, invoke, linkCodes })
      adapters.push(adapter)
      const entra = new EntraMatch({
        links,
        issuer: env.GATEWAY_TEAMS_ENTRA_ISSUER ?? `${env.GATEWAY_TEAMS_LOGIN_URL}/${teams.tenantId}/v2.0`,
        tenantId: teams.tenantId,
        log: tlog,
      })
      teamsChat = { adapter, entra }
    }
    const chat = new ChatAdapters(adapters)
    app.decorate('chat', chat)
    app.decorate('slack', slack)
    app.decorate('teamsChat', teamsChat)
    app.decorate('chatLinking', linking)
    app.addHook('onReady', () => chat.start())
    app.addHook('preClose', () => chat.close())
  },
  {
    name: 'chat',
    dependencies: ['auth', 'sessions', 'upstream', 'audit', 'stores', 'metrics', 'msteams', 'overview'],
  },
)

/**
 * The Slack app, with what the adapters share. The Slack SDKs are loaded here, only for a gateway with a bot
 * token: every other boot (and every test process) would pay a third of a second of CPU for them.
 */
async function slackApp(
  app: FastifyInstance,
  shared: {
    reads: RuntimeReads
    answers: ChatAnswers
    store: ChatMessageStore
    seen: SeenKeys
    linking: ChatLinkFlow
    claims: ChatClaims
    base: string
  },
): Promise<SlackApp> {
  const { slackClient } = await import('./slack/client.ts')
  const { config } = app
  const env = config.env
  const { reads, answers, store, seen, linking, base } = shared
  const log = app.log.child({ component: 'slack' })
  const metrics = createSlackMetrics(app.metrics.registry)
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
  // A trigger lives three seconds and an ephemeral answers a click: no retries that outlast either.
  const quick = slackClient(env, log, false)
  const linkCodes = new SlackLinkCodes({ web: quick, flow: linking, audit: app.audit, metrics, log })
  linking.setCodeSender('slack', linkCodes)
  const interactions = new SlackInteractions({
    web: quick,
    answers,
    claims: shared.claims,
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
      : new (await import('./slack/socket-mode.ts')).SlackSocketMode({
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
  return { adapter, metrics, seen, signIn, linkCodes }
}
