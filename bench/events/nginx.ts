import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const NCHAN_MODULE = '/usr/lib/nginx/modules/ngx_nchan_module.so'

/** Whether nginx with the nchan module is installed (Debian: `apt-get install nginx libnginx-mod-nchan`). */
export function nginxAvailable(): boolean {
  try {
    execFileSync('nginx', ['-v'], { stdio: 'ignore' })
    return existsSync(NCHAN_MODULE)
  } catch {
    return false
  }
}

/** Installs nginx and nchan with apt when running as root; says whether they are there afterwards. */
export function ensureNginx(log: (line: string) => void): boolean {
  if (nginxAvailable()) return true
  if (process.getuid?.() !== 0) return false
  log('installing nginx and libnginx-mod-nchan with apt-get')
  try {
    execFileSync('apt-get', ['install', '-y', '-q', 'nginx', 'libnginx-mod-nchan'], {
      stdio: 'ignore',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    })
  } catch {
    return false
  }
  return nginxAvailable()
}

/** `nginx/1.22.1`, and the nchan package's version when dpkg knows it (nginx -v prints on stderr). */
export function nginxVersion(): string {
  const nginx = spawnSync('nginx', ['-v'], { encoding: 'utf8' })
  const version = `${nginx.stderr ?? ''}${nginx.stdout ?? ''}`.trim().replace(/^nginx version: /, '')
  // dpkg's format field, not a template placeholder.
  const format = ['-f=$', '{Version}'].join('')
  const nchan = spawnSync('dpkg-query', ['-W', format, 'libnginx-mod-nchan'], { encoding: 'utf8' })
  return nchan.status === 0 ? `${version}, nchan ${nchan.stdout.trim()}` : version
}

/** One nginx (one worker, like the single-threaded Node servers) serving nchan and a naive proxy. */
export class Nginx {
  readonly dir: string
  readonly nchanPort: number
  readonly proxyPort: number
  #master: ChildProcess | null = null

  constructor(opts: { nchanPort: number; proxyPort: number; upstreamPort: number }) {
    this.dir = mkdtempSync(join(tmpdir(), 'krg-bench-nginx-'))
    this.nchanPort = opts.nchanPort
    this.proxyPort = opts.proxyPort
    for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(join(this.dir, d))
    writeFileSync(
      join(this.dir, 'nginx.conf'),
      `load_module ${NCHAN_MODULE};
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 20000;
pid ${this.dir}/nginx.pid;
error_log ${this.dir}/error.log warn;
events { worker_connections 16000; multi_accept on; }
http {
  access_log off;
  # Nagle off, as on the Node side.
  tcp_nodelay on;
  client_body_temp_path ${this.dir}/body;
  proxy_temp_path ${this.dir}/proxy;
  fastcgi_temp_path ${this.dir}/fastcgi;
  uwsgi_temp_path ${this.dir}/uwsgi;
  scgi_temp_path ${this.dir}/scgi;
  nchan_shared_memory_size 256M;
  server {
    listen 127.0.0.1:${opts.nchanPort} backlog=4096;
    location = /pub {
      nchan_publisher;
      nchan_channel_id bench;
      nchan_message_buffer_length 4096;
      nchan_message_timeout 1h;
    }
    location = /sub {
      nchan_subscriber eventsource;
      nchan_channel_id bench;
      nchan_subscriber_first_message newest;
    }
  }
  server {
    listen 127.0.0.1:${opts.proxyPort} backlog=4096;
    location = /events {
      proxy_pass http://127.0.0.1:${opts.upstreamPort}/events;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_cache off;
      proxy_read_timeout 1h;
    }
  }
}
`,
    )
  }

  async start(): Promise<void> {
    this.#master = spawn(
      'nginx',
      ['-p', this.dir, '-c', join(this.dir, 'nginx.conf'), '-e', join(this.dir, 'error.log')],
      {
        stdio: 'ignore',
      },
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
