import fp from 'fastify-plugin'
import type { TeamsInvokeHandler } from './activity.ts'
import { TeamsBearerCheck } from './auth.ts'
import { TeamsBot } from './bot.ts'
import type { TeamsConnector } from './connector.ts'
import type { TeamsInstallationStore } from './installations.ts'
import { createTeamsMetrics, type TeamsMetrics } from './metrics.ts'
import { BotFrameworkOpenId } from './openid.ts'
import { TeamsTokens } from './token.ts'

/** The Teams bot's parts: the messaging endpoint's checks and dispatch, and the connector for the adapter. */
export interface TeamsApp {
  /** GATEWAY_TEAMS_APP_ID. */
  readonly appId: string
  /** GATEWAY_TEAMS_TENANT_ID. */
  readonly tenantId: string
  /** The bot's id in activities (`28:<app id>`). */
  readonly botId: string
  /** Inbound bearer tokens. */
  readonly bearer: TeamsBearerCheck
  /** Outbound: post, update, 1:1 conversations (the bot's own token, the serviceUrl allowlist). */
  readonly connector: TeamsConnector
  readonly installations: TeamsInstallationStore
  readonly metrics: TeamsMetrics
  /** What the messaging endpoint does with a checked activity. */
  readonly bot: TeamsBot
  /** Sets the handler of `adaptiveCard/action` invokes (the Teams adapter, src/chat/msteams/invoke.ts). */
  setInvokeHandler(handler: TeamsInvokeHandler): void
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The Teams bot (src/chat/msteams); null without GATEWAY_TEAMS_APP_ID. */
    msteams: TeamsApp | null
  }
}

/**
 * The Microsoft Teams bot's transport, with GATEWAY_TEAMS_APP_ID/_PASSWORD/_TENANT_ID: the bearer check of the
 * messaging endpoint (routes/msteams.ts), the bot's own token and connector client, installations (memory or
 * Redis), metrics, and the bot's answers to what needs no adapter (installations, a mention in a channel).
 * Cards and answers plug in through {@link TeamsApp.setInvokeHandler}.
 */
export const teamsPlugin = fp(
  async (app) => {
    const { config } = app
    const env = config.env
    const appId = env.GATEWAY_TEAMS_APP_ID
    const password = env.GATEWAY_TEAMS_APP_PASSWORD
    const tenantId = env.GATEWAY_TEAMS_TENANT_ID
    if (appId === undefined || password === undefined || tenantId === undefined) {
      app.decorate('msteams', null)
      return
    }
    const log = app.log.child({ component: 'msteams' })
    const openId = new BotFrameworkOpenId({
      url: env.GATEWAY_TEAMS_OPENID_URL,
      timeoutMs: env.GATEWAY_NOTIFY_TIMEOUT_MS,
      production: config.production,
    })
    const bearer = new TeamsBearerCheck({ appId, tenantId, openId, timeoutMs: env.GATEWAY_NOTIFY_TIMEOUT_MS })
    const tokens = new TeamsTokens({
      loginUrl: env.GATEWAY_TEAMS_LOGIN_URL,
      tenantId,
      appId,
      password,
      // The connector's audience is the Bot Framework's issuer: `.com` publicly, `.us` in the US government clouds.
      scope: async () => `${(await openId.get()).issuer}/.default`,
      timeoutMs: env.GATEWAY_NOTIFY_TIMEOUT_MS,
    })
    // Microsoft's SDK is loaded only for a gateway with a Teams bot: every other boot (and every test process)
    // would pay a third of a second of CPU for it.
    const { TeamsConnectorClient } = await import('./connector.ts')
    const connector = new TeamsConnectorClient({
      appId,
      tokens,
      serviceUrls: env.GATEWAY_TEAMS_SERVICE_URLS,
      production: config.production,
      timeoutMs: env.GATEWAY_NOTIFY_TIMEOUT_MS,
      retryMs: env.GATEWAY_NOTIFY_RETRY_MS,
      retryForMs: env.GATEWAY_NOTIFY_RETRY_FOR_S * 1000,
      log,
    })
    const installations = app.stores.teamsInstallations()
    const metrics = createTeamsMetrics(app.metrics.registry)
    const botId = `28:${appId}`
    const bot = new TeamsBot({
      botId,
      connector,
      installations,
      seen: app.stores.seenKeys(),
      serviceUrls: env.GATEWAY_TEAMS_SERVICE_URLS,
      production: config.production,
      log,
    })
    app.decorate('msteams', {
      appId,
      tenantId,
      botId,
      bearer,
      connector,
      installations,
      metrics,
      bot,
      setInvokeHandler: (handler: TeamsInvokeHandler) => bot.setInvokeHandler(handler),
    })
    app.addHook('preClose', () => bot.close())
  },
  { name: 'msteams', dependencies: ['stores', 'metrics'] },
)
