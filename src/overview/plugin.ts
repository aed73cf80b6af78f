import fp from 'fastify-plugin'
import { Claims } from './claims.ts'
import { OverviewHub } from './hub.ts'

/** The console's overview as the routes see it. */
export interface OverviewService {
  readonly hub: OverviewHub
  readonly claims: Claims
}

declare module 'fastify' {
  interface FastifyInstance {
    overview: OverviewService
  }
}

/**
 * Decorates `app.overview`: the hub that streams every visible session's summary to each person's overview,
 * and the "I'm on it" marks on questions (on the session board, so shared across replicas). Shutdown ends
 * every overview stream in `preClose`, with the viewer streams, so clients reconnect to another replica.
 * A cookie session revoked on any replica ends its overviews at once.
 */
export const overviewPlugin = fp(
  async (app) => {
    const env = app.config.env
    const claims = new Claims(app.board)
    const hub = new OverviewHub({
      sessions: app.sessions,
      summaries: app.summaries,
      presence: app.presence,
      claims,
      board: app.board,
      stillValid: (operator) => app.auth.stillValid(operator),
      limits: {
        maxQueuedBytes: env.GATEWAY_VIEWER_MAX_QUEUED_BYTES,
        pingIntervalMs: env.GATEWAY_PING_INTERVAL_MS,
        authRecheckMs: env.GATEWAY_STREAM_AUTH_RECHECK_MS,
        presenceIntervalMs: Math.max(250, Math.floor(env.GATEWAY_PRESENCE_TTL_MS / 3)),
        lingerMs: env.GATEWAY_STREAM_LINGER_MS,
      },
      log: app.log.child({ component: 'overview' }),
    })
    app.decorate('overview', { hub, claims })
    // A revoked cookie session (on any replica) loses its overviews now, like its event streams.
    const stopHearing = await app.auth.onCookieRevoked({
      revoked: (idHashes) => hub.endCookieSessions(idHashes),
      resync: () => void hub.recheckCredentials(),
    })
    app.addHook('onClose', async () => stopHearing())
    app.addHook('preClose', () => hub.close())
  },
  { name: 'overview', dependencies: ['summary', 'auth', 'stores', 'sessions'] },
)
