import fp from 'fastify-plugin'

// STUB: owned by the events work: decorates app.events
export const eventsPlugin = fp(async () => {}, { name: 'events' })
