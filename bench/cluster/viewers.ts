/**
 * Bench child: the cluster bench's viewers (bench/common/viewers.ts) and each replica's overview stream. Every
 * delivery is recorded; the orchestrator resets the recording when its measured phase starts. An overview
 * socket only counts the `event: session` frames it reads (they carry summaries, not the events' `t`).
 */
import net from 'node:net'
import { serve } from '../common/ipc.ts'
import { type ConnectArgs, Recording, Viewers } from '../common/viewers.ts'

/** Deliveries by the port of the replica the viewer reads from. */
const recordings = new Map<number, Recording>()
const viewers = new Viewers((port) => {
  const known = recordings.get(port)
  if (known !== undefined) return known
  const r = new Recording()
  recordings.set(port, r)
  return r
})
const FRAME = 'event: session\n'
const overviews: { socket: net.Socket; frames: number; status: string }[] = []

/** Opens `GET /api/overview` on a replica as a console does; counts its frames from the response head on. */
function openOverview(args: { port: number; token: string }): null {
  const socket = net.connect({ port: args.port, host: '127.0.0.1', noDelay: true })
  const entry = { socket, frames: 0, status: '' }
  let carry = ''
  socket.on('connect', () =>
    socket.write(
      `GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1:${args.port}\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${args.token}\r\n\r\n`,
    ),
  )
  socket.on('data', (chunk: Buffer) => {
    const text = carry + chunk.toString('latin1')
    if (entry.status === '') entry.status = text.slice(9, 12)
    for (let at = text.indexOf(FRAME); at !== -1; at = text.indexOf(FRAME, at + FRAME.length)) entry.frames++
    // A frame's name cut by the chunk's end is found with the next chunk.
    carry = text.slice(-(FRAME.length - 1))
  })
  socket.on('error', () => {})
  overviews.push(entry)
  return null
}

serve({
  connect: (args) => viewers.connect(args as ConnectArgs),
  overview: (args) => openOverview(args as { port: number; token: string }),
  /** Frames each overview read so far, and its response status. */
  overviews: () => overviews.map((o) => ({ frames: o.frames, status: o.status, open: !o.socket.destroyed })),
  reset: () => {
    for (const r of recordings.values()) r.reset()
    return null
  },
  /** Every delivery's figures, and the p99 of each replica's viewers by its port. */
  stats: () => ({
    ...Recording.merged(recordings.values()).summary(),
    p99ByPort: Object.fromEntries([...recordings].map(([port, r]) => [port, r.percentile(0.99)])),
    open: viewers.open,
    ended: viewers.ended,
  }),
  close: () => {
    for (const o of overviews) o.socket.destroy()
    overviews.length = 0
    return viewers.close()
  },
})
