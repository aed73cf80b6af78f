import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions, LevelWithSilentOrString } from 'pino'

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'

/**
 * A request's logger that makes its pino child only when a line at an enabled level is written. Making the
 * child serialises its bindings (the request id) through the redaction on every request, and at the usual
 * levels most requests write no line of their own: a proxied read at `warn` writes none.
 */
class LazyChildLogger {
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions
  #child: FastifyBaseLogger | undefined

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  get #real(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options)
    return this.#child
  }

  get level(): string {
    return (this.#child ?? this.#parent).level
  }

  set level(level: string) {
    this.#real.level = level
  }

  isLevelEnabled(level: LevelWithSilentOrString): boolean {
    return (
      (this.#child ?? this.#parent) as FastifyBaseLogger & { isLevelEnabled(l: string): boolean }
    ).isLevelEnabled(level)
  }

  #write(level: Level, args: unknown[]): void {
    if (!this.isLevelEnabled(level)) return
    ;(this.#real[level] as (...a: unknown[]) => void)(...args)
  }

  fatal(...args: unknown[]): void {
    this.#write('fatal', args)
  }
  error(...args: unknown[]): void {
    this.#write('error', args)
  }
  warn(...args: unknown[]): void {
    this.#write('warn', args)
  }
  info(...args: unknown[]): void {
    this.#write('info', args)
  }
  debug(...args: unknown[]): void {
    this.#write('debug', args)
  }
  trace(...args: unknown[]): void {
    this.#write('trace', args)
  }
  silent(): void {}

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real.child(bindings, options)
  }
}

/** Fastify's `childLoggerFactory`: each request's logger, its pino child made on its first line. */
export function lazyChildLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new LazyChildLogger(logger, bindings, options) as unknown as FastifyBaseLogger
}
