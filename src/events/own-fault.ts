/**
 * An error thrown by the gateway's own handling of what a runtime sent (parsing, gap filling), wrapped so the
 * code that reads the runtime does not take it for the runtime's failure: a bug is logged as one, with its
 * error, never counted as an upstream drop or a trace that could not be read.
 */
export class OwnFault extends Error {
  constructor(cause: unknown) {
    super('the gateway failed handling an upstream stream', { cause })
    this.name = 'OwnFault'
  }
}
