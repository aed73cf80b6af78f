/**
 * The gateway as production runs it: `node dist/server.js` (compiled by `npm run build`, see build.ts), in its
 * own process, with its sessions in a sessions file (by default one, `bench`, pointing at the contestant's
 * runtime), embedded or on Redis. The proxy and cluster benches start their gateways here.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SignJWT } from 'jose'
import { freePort, sleep } from '../common/orchestrator.ts'

const secret = 'bench-jwt-secret-that-is-long-enough-0123456789abcdef'
const issuer = 'https://idp.bench'
const audience = 'kasm-runtime-gateway'
/** How long a gateway may take to answer readyz: boots through tsx on a loaded machine are slow. */
const BOOT_MS = 90_000
const root = fileURLToPath(new URL('../../', import.meta.url))

/** A running gateway child. */
export interface GatewayProcess {
  origin: string
  pid: number
  /** Stops it with SIGTERM (a graceful drain, so a CPU profile is written) and removes its files. */
  stop(): Promise<void>
}

/** An HS256 bearer of an operator of team `bench`, valid for two hours. */
export function benchBearer(): Promise<string> {
  return new SignJWT({ roles: ['operator'], teams: ['bench'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject('bench-operator')
    .setIssuer(issuer)
    .setAudience(audience)
    .setIssuedAt()
    .setExpirationTime('2h')
    .sign(new TextEncoder().encode(secret))
}

/**
 * Starts `node dist/server.js` for the runtime at `upstream`; `redisUrl` puts it in cluster mode. With
 * `profileDir` it runs under `--cpu-prof` and writes its profile there when stopped.
 */
export async function startGateway(opts: {
  upstream: string
  /** The sessions file's sessions, `kasmId` to upstream URL (default `bench` at `upstream`), all of team bench. */
  sessions?: ReadonlyMap<string, string>
  redisUrl?: string
  /** GATEWAY_REDIS_PREFIX (default one per port: a gateway of its own); replicas of one cluster share one. */
  redisPrefix?: string
  /** More environment (e.g. GATEWAY_REDIS_CLUSTER_NODES), over the bench's. */
  env?: Record<string, string>
  profileDir?: string
  /** Node's own arguments before the script (e.g. `--trace-gc`). */
  nodeArgs?: readonly string[]
  /** From source through tsx (no build needed) instead of dist/. */
  tsx?: boolean
}): Promise<GatewayProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'krg-bench-gateway-'))
  const sessionsFile = join(dir, 'sessions.json')
  writeFileSync(
    sessionsFile,
    JSON.stringify({
      sessions: [...(opts.sessions ?? new Map([['bench', opts.upstream]]))].map(([kasmId, upstream]) => ({
        kasmId,
        upstream,
        messagingToken: 'bench-token',
        team: 'bench',
      })),
    }),
  )
  const port = await freePort()
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    HOST: '127.0.0.1',
    PORT: String(port),
    GATEWAY_DEMO: 'off',
    GATEWAY_SESSIONS_FILE: sessionsFile,
    GATEWAY_JWT_SECRET: secret,
    GATEWAY_JWT_ISSUER: issuer,
    GATEWAY_JWT_AUDIENCE: audience,
    GATEWAY_COOKIE_SECRET: 'bench-cookie-secret-0123456789abcdefghij',
    GATEWAY_PUBLIC_ORIGIN: 'http://127.0.0.1',
    GATEWAY_RATE_LIMIT_MAX: '100000000',
    // As with the rate limit: a bench measures the request path, not the shedding that would refuse its load
    // (the suite's smoke run of a bench, on a loaded machine, was shed with 503 before its first request).
    GATEWAY_OVERLOAD_LOOP_DELAY_MS: '0',
    GATEWAY_UPSTREAM_ALLOW: '0.0.0.0/0,::/0',
    // Where the probes of bench/probes write (`--node-args "--import ..."`).
    ...(process.env.KRG_PROBE_DIR === undefined ? {} : { KRG_PROBE_DIR: process.env.KRG_PROBE_DIR }),
    ...(opts.redisUrl === undefined
      ? {}
      : {
          REDIS_URL: opts.redisUrl,
          GATEWAY_REDIS_PREFIX: opts.redisPrefix ?? `krgbench:${port}:`,
          GATEWAY_ENCRYPTION_KEY: 'QmVuY2gtZW5jcnlwdGlvbi1rZXktMzItYnl0ZXMhISE',
        }),
    ...opts.env,
  }
  const args = [
    ...(opts.profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${opts.profileDir}`]),
    ...(opts.nodeArgs ?? []),
    ...(opts.tsx ? ['--import', 'tsx', 'src/server.ts'] : ['dist/server.js']),
  ]
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: root,
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const origin = `http://127.0.0.1:${port}`
  // The suite runs the benches' quick forms beside other tests: a boot through tsx on a loaded 2-core machine
  // has taken over 30 s (the tests' BOOT_MS is 90 s for the same reason).
  const deadline = Date.now() + BOOT_MS
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the gateway exited with ${child.exitCode}`)
    const ready = await fetch(`${origin}/readyz`).then(
      (r) => r.ok,
      () => false,
    )
    if (ready) break
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`the gateway did not become ready in ${BOOT_MS / 1000} s`)
    }
    await sleep(100)
  }
  return {
    origin,
    pid: child.pid ?? 0,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
        await exited
        clearTimeout(timer)
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** Trades the bearer for a cookie session (`POST /auth/session`) and returns the `Cookie` header value. */
export async function benchCookie(origin: string, bearer: string): Promise<string> {
  const res = await fetch(`${origin}/auth/session`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}` },
  })
  const setCookie = res.headers.getSetCookie()[0]
  if (res.status !== 201 || setCookie === undefined) throw new Error(`no cookie session: ${res.status}`)
  return setCookie.split(';')[0] as string
}
