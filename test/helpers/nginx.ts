import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { promisify } from 'node:util'

/** Debian's nginx (`nginx-light`); NGINX_PATH overrides. */
export const NGINX = process.env.NGINX_PATH ?? '/usr/sbin/nginx'

const run = promisify(execFile)

/**
 * Checks the configuration `conf` (a file under the prefix `dir`) with `nginx -t`, failing the test with what
 * nginx said (or how to install it), then starts nginx in the foreground. The caller stops it.
 */
export async function startNginx(dir: string, conf: string): Promise<ChildProcess> {
  try {
    await run(NGINX, ['-t', '-q', '-p', dir, '-c', conf])
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string }
    assert.fail(
      e.code === 'ENOENT' ? `${NGINX} not found: apt-get install nginx-light` : `nginx -t: ${e.stderr}`,
    )
  }
  return spawn(NGINX, ['-p', dir, '-c', conf], { stdio: 'ignore' })
}
