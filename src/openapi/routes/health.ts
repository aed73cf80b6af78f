import { object, text } from '../schemas.ts'

const READINESS = object(
  {
    status: { type: 'string', enum: ['ready', 'degraded', 'not_ready'] },
    ready: { type: 'boolean' },
    degraded: {
      type: 'array',
      items: { type: 'string' },
      description: 'the checks whose dependency is away',
    },
    checks: {
      type: 'object',
      additionalProperties: { type: 'string' },
      description: 'each check: `ok`, `degraded: <why>` or why it failed',
    },
  },
  ['status', 'ready', 'degraded', 'checks'],
)

/** The probes and the scrape (routes/health.ts). */
export const HEALTH = {
  healthz: {
    tags: ['health'],
    summary: 'Liveness: the process answers',
    response: { 200: object({ status: { type: 'string', enum: ['ok'] } }, ['status']) },
  },
  readyz: {
    tags: ['health'],
    summary: 'Readiness: configuration, registry and stores usable (`degraded` stays 200)',
    response: {
      200: { ...READINESS, description: 'ready, or degraded' },
      503: { ...READINESS, description: 'not ready (or draining)' },
    },
  },
  metrics: {
    tags: ['health'],
    summary: 'Prometheus metrics (docs/operations.md lists them)',
    response: { 200: text('text/plain', 'the Prometheus text format') },
  },
} as const
