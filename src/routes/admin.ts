import type { FastifyInstance } from 'fastify'

// STUB: owned by the admin work
export async function adminRoutes(_app: FastifyInstance): Promise<void> {}
