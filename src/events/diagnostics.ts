/**
 * The event path's diagnostics channels (node:diagnostics_channel), named as undici and node:http name
 * theirs: a probe subscribes to see each batch of events where it passes, without a change to the gateway.
 * A channel without subscribers costs one property read per batch, so they stay on in production.
 * `bench/probes/stages.mjs` uses them to time each stage of the cluster bench's events.
 */
import diagnostics from 'node:diagnostics_channel'
import type { BusMessage, Delivery } from './bus.ts'

/** What `krg:events:read` and `krg:events:stored` carry. */
export interface ReadMessage {
  readonly kasmId: string
  readonly messages: readonly BusMessage[]
}

/** What `krg:events:hub` carries. */
export interface HubMessage {
  readonly kasmId: string
  readonly deliveries: readonly Delivery[]
}

/** A session's reader read these messages from its runtime; published before it appends them. */
export const readChannel = diagnostics.channel('krg:events:read')

/** The bus stored what the reader read (the append answered); published before the next chunk is read. */
export const storedChannel = diagnostics.channel('krg:events:stored')

/** A batch of a session's events reached this replica's hub, before it goes to the viewers. */
export const hubChannel = diagnostics.channel('krg:events:hub')
