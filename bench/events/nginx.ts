import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { NginxServer } from '../common/nginx.ts'

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
export class Nginx extends NginxServer {
  readonly nchanPort: number
  readonly proxyPort: number

  constructor(opts: { nchanPort: number; proxyPort: number; upstreamPort: number }) {
    super(
      `  nchan_shared_memory_size 256M;
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
  }`,
      `load_module ${NCHAN_MODULE};`,
    )
    this.nchanPort = opts.nchanPort
    this.proxyPort = opts.proxyPort
  }
}
