/**
 * Bench child: the ceiling. A minimal raw node:http fan-out of the runtime's pre-serialised bytes: one
 * upstream connection, and every chunk read in an event-loop turn written to every viewer's socket in one
 * write (the same coalescing the gateway does), no parsing, no replay, no auth.
 */
import http from 'node:http'
import type { Socket } from 'node:net'
import { serve } from '../common/ipc.ts'
import { probeHandlers } from '../common/probes.ts'

const upstream = process.env.BENCH_UPSTREAM ?? ''
const HEAD = Buffer.from(
  'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n',
)
const sockets = new Set<Socket>()
let pending: Buffer[] = []
let scheduled = false

function flush(): void {
  scheduled = false
  const buf = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending)
  pending = []
  for (const socket of sockets) socket.write(buf)
}

http.get(
  `${upstream}events`,
  { agent: false, headers: { 'x-kasm-runtime-session-token': 'bench-token' } },
  (res) => {
    res.on('data', (chunk: Buffer) => {
      pending.push(chunk)
      if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    })
  },
)

const server = http.createServer((req) => {
  const socket = req.socket
  socket.setNoDelay(true)
  socket.write(HEAD)
  sockets.add(socket)
  socket.on('error', () => {})
  socket.once('close', () => sockets.delete(socket))
})
server.listen(0, '127.0.0.1')
await new Promise((r) => server.once('listening', r))

// An exit rather than death by the signal, so a `--cpu-prof` profile (run.ts --profile) is written.
process.once('SIGTERM', () => process.exit(0))

serve({
  info: () => ({ port: (server.address() as { port: number }).port, pid: process.pid }),
  viewers: () => sockets.size,
  ...probeHandlers(),
})
