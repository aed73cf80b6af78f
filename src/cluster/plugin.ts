import fp from 'fastify-plugin'

// STUB: owned by the cluster work: decorates app.redis (null when REDIS_URL is unset)
export const clusterPlugin = fp(async () => {}, { name: 'cluster' })
