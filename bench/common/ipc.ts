import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/** A request from the orchestrator to a bench child, and its answer. */
interface Request {
  id: number
  cmd: string
  args?: unknown
}
interface Reply {
  id: number
  ok: boolean
  result?: unknown
  error?: string
}

/** In a child: answers the orchestrator's commands with `handlers` (each may be async). */
export function serve(handlers: Record<string, (args: unknown) => unknown>): void {
  process.on('message', async (msg: Request) => {
    const handler = handlers[msg.cmd]
    let reply: Reply
    try {
      if (handler === undefined) throw new Error(`unknown command ${msg.cmd}`)
      reply = { id: msg.id, ok: true, result: await handler(msg.args) }
    } catch (err) {
      reply = { id: msg.id, ok: false, error: (err as Error).message }
    }
    process.send?.(reply, undefined, undefined, () => {})
  })
  process.on('disconnect', () => process.exit(0))
}

/**
 * A bench child process started with tsx (and --expose-gc so memory is measured after a collection).
 * `script` is a path under bench/, e.g. `common/emitter.ts`.
 */
export class Child {
  readonly process: ChildProcess
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  #next = 1
  readonly exited: Promise<number | null>

  constructor(script: string, env: Record<string, string> = {}, execArgv: string[] = []) {
    const file = fileURLToPath(new URL(`../${script}`, import.meta.url))
    this.process = fork(file, [], {
      execArgv: ['--import', 'tsx', '--expose-gc', ...execArgv],
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    })
    this.process.on('message', (msg: Reply) => {
      const pending = this.#pending.get(msg.id)
      if (pending === undefined) return
      this.#pending.delete(msg.id)
      if (msg.ok) pending.resolve(msg.result)
      else pending.reject(new Error(msg.error))
    })
    this.exited = new Promise((resolve) => this.process.once('exit', (code) => resolve(code)))
    void this.exited.then(() => {
      for (const p of this.#pending.values()) p.reject(new Error(`${script} exited`))
      this.#pending.clear()
    })
  }

  get pid(): number {
    return this.process.pid ?? 0
  }

  call<T>(cmd: string, args?: unknown): Promise<T> {
    const id = this.#next++
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      this.process.send({ id, cmd, args } satisfies Request)
    })
  }

  async stop(): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return
    this.process.kill('SIGTERM')
    const timer = setTimeout(() => this.process.kill('SIGKILL'), 5000)
    await this.exited
    clearTimeout(timer)
  }
}
