import fp from 'fastify-plugin'

// STUB: owned by the sessions work: decorates app.sessions (SessionRegistry)
export const sessionsPlugin = fp(async () => {}, { name: 'sessions' })
