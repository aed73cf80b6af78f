/** An nginx master of a bench's own: a generated config in a temporary directory, never a system service. */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * The directives every bench nginx shares (one worker, like the single-threaded Node servers; its files
 * under `dir`); `http` is the body of its `http {}` block.
 */
function config(dir: string, http: string, head: string): string {
  return `${head}
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 20000;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 16000; multi_accept on; }
http {
  access_log off;
  # Nagle off, as on the Node side.
  tcp_nodelay on;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${http}
}
`
}

/** nginx with `http` as its http block (`head`: top-level lines such as load_module), started and stopped. */
export class NginxServer {
  readonly dir: string
  #master: ChildProcess | null = null

  constructor(http: string, head = '') {
    this.dir = mkdtempSync(join(tmpdir(), 'krg-bench-nginx-'))
    for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(this.dir, d))
    writeFileSync(join(this.dir, 'nginx.conf'), config(this.dir, http, head))
  }

  async start(): Promise<void> {
    this.#master = spawn(
      'nginx',
      ['-p', this.dir, '-c', join(this.dir, 'nginx.conf'), '-e', join(this.dir, 'error.log')],
      { stdio: 'ignore' },
    )
    const deadline = Date.now() + 10_000
    while (this.workers().length === 0) {
      if (Date.now() > deadline) throw new Error(`nginx did not start: ${this.errors()}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  /** The worker processes (they hold the connections). */
  workers(): number[] {
    const pid = this.#master?.pid
    if (pid === undefined) return []
    try {
      return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
        .trim()
        .split(/\s+/)
        .filter((s) => s.length > 0)
        .map(Number)
    } catch {
      return []
    }
  }

  errors(): string {
    try {
      return readFileSync(join(this.dir, 'error.log'), 'utf8').slice(-2000)
    } catch {
      return ''
    }
  }

  async stop(): Promise<void> {
    const master = this.#master
    this.#master = null
    if (master !== null && master.exitCode === null) {
      const exited = new Promise((r) => master.once('exit', r))
      master.kill('SIGQUIT')
      const timer = setTimeout(() => master.kill('SIGKILL'), 5000)
      await exited
      clearTimeout(timer)
    }
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true })
  }
}
