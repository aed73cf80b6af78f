/**
 * Bench child: the cheapest proxy a team could write with the gateway's own stack, Fastify 5 and
 * @fastify/reply-from over undici. It maps `/desktop/<id>/mcp/<rest>` to `<BENCH_UPSTREAM><rest>`, streams the
 * body through unparsed and sets the messaging token header. No auth, audit, limits, metrics or header policy.
 */
import replyFrom from '@fastify/reply-from'
import Fastify from 'fastify'
import { TOKEN_HEADER } from '../../src/upstream/agent.ts'
import { serve } from '../common/ipc.ts'

const upstream = process.env.BENCH_UPSTREAM ?? ''
const app = Fastify({ logger: false })
// Bodies stream through as they arrive, whatever their type (JSON, multipart).
app.removeAllContentTypeParsers()
app.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
await app.register(replyFrom, { base: upstream })
const prefix = /^\/desktop\/[^/]+\/mcp\//
app.all('/desktop/:kasmId/mcp/*', (request, reply) =>
  reply.from(request.url.replace(prefix, '/'), {
    rewriteRequestHeaders: (_request, headers) => ({ ...headers, [TOKEN_HEADER]: 'bench-token' }),
  }),
)
await app.listen({ port: 0, host: '127.0.0.1' })

// A graceful exit, so a `--cpu-prof` profile (run.ts --profile) is written.
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)))

serve({
  info: () => ({ port: (app.server.address() as { port: number }).port, pid: process.pid }),
})
