import fp from 'fastify-plugin'

// STUB: owned by the auth work: request.operator, app.requireAccess
export const authPlugin = fp(async () => {}, { name: 'auth' })
