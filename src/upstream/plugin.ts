import fp from 'fastify-plugin'

// STUB: owned by the proxy work: decorates app.upstream
export const upstreamPlugin = fp(async () => {}, { name: 'upstream' })
