import type { FastifyInstance } from 'fastify'

// STUB: owned by the auth work
export async function authRoutes(_app: FastifyInstance): Promise<void> {}
