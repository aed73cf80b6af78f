import type { FastifyInstance } from 'fastify'

// STUB: owned by the integration work: starts the simulated runtime as session `demo`, prints a login link
export async function startDemo(
  _app: FastifyInstance,
): Promise<{ announce(app: FastifyInstance): void; close(): Promise<void> }> {
  return { announce: () => {}, close: async () => {} }
}
