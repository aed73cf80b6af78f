import type { Broker } from './broker/broker.ts'
import type { BusMessage, EventBus, StreamHead, StreamPosition, Subscriber, Subscription } from './bus.ts'
import { Hub } from './hub.ts'

/**
 * The {@link EventBus} the rest of the gateway uses (session streams, routes, summaries), as a facade over
 * a broker (the log) and this replica's {@link Hub} (the viewers): appends and heads go to the broker,
 * subscriptions to the hub.
 */
export class HubBus<P> implements EventBus {
  readonly broker: Broker<P>
  readonly hub: Hub<P>

  constructor(broker: Broker<P>) {
    this.broker = broker
    this.hub = new Hub(broker)
  }

  append(kasmId: string, messages: readonly BusMessage[], fence: number): Promise<boolean> {
    return this.broker.append(kasmId, messages, fence)
  }

  head(kasmId: string): Promise<StreamHead | null> {
    return this.broker.head(kasmId)
  }

  subscribe(kasmId: string, from: StreamPosition, subscriber: Subscriber): Promise<Subscription> {
    return this.hub.join(kasmId, from, subscriber)
  }

  drop(kasmId: string): Promise<void> {
    return this.broker.drop(kasmId)
  }

  async close(): Promise<void> {
    this.hub.close()
    await this.broker.close()
  }
}
