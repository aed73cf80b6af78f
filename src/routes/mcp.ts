import type { FastifyInstance } from 'fastify'

// STUB: owned by the mcp work
export async function mcpRoutes(_app: FastifyInstance): Promise<void> {}
