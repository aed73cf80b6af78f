import fp from 'fastify-plugin'
import type { SessionBoard } from './board.ts'
import { SessionSummaries } from './summaries.ts'

declare module 'fastify' {
  interface FastifyInstance {
    /** Per-session summaries folded from the event bus, and their transitions (see src/summary). */
    summaries: SessionSummaries
    /** Small shared per-session state: reader health, question claims (memory, or Redis in a cluster). */
    board: SessionBoard
  }
}

/**
 * Decorates `app.summaries` and `app.board`. Readers of this replica report their runtime's health to the
 * board, where every replica's summaries read it.
 */
export const summaryPlugin = fp(
  async (app) => {
    const board = app.stores.board
    const summaries = new SessionSummaries({
      bus: app.events.bus,
      retain: (kasmId) => app.events.streams.retain(kasmId),
      board,
      log: app.log.child({ component: 'summaries' }),
    })
    const offHealth = app.events.streams.onHealth((kasmId, health) => summaries.reportHealth(kasmId, health))
    // A removed session's board goes with it (every replica hears of the removal; dropping twice is harmless).
    const offSessions = app.sessions.onChange((kasmId) => {
      void app.sessions
        .get(kasmId)
        .then((session) => (session === undefined ? board.drop(kasmId) : undefined))
        .catch((err: unknown) => app.log.warn({ err, kasmId }, 'board of a removed session not dropped'))
    })
    app.decorate('board', board)
    app.decorate('summaries', summaries)
    app.addHook('preClose', async () => {
      offHealth()
      offSessions()
      await summaries.close()
    })
    app.addHook('onClose', () => board.close())
  },
  { name: 'summary', dependencies: ['events', 'sessions', 'stores'] },
)
