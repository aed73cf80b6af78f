import fp from 'fastify-plugin'

// STUB: owned by the sessions/admin/audit work: decorates app.audit
export const auditPlugin = fp(async () => {}, { name: 'audit' })
