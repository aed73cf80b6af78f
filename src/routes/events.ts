import type { FastifyInstance } from 'fastify'

// STUB: owned by the events work
export async function eventsRoutes(_app: FastifyInstance): Promise<void> {}
