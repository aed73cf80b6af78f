/**
 * How a test runs the gateway's sources in a child process (a replica, a topology's gateways): Node's own type
 * stripping, as plain `node` would run the built files, without tsx's loader. The loader costs each child half
 * a second of CPU (its hooks see every module the gateway loads), and the suite starts about a hundred such
 * children. The flag is needed before Node 22.18 and harmless after; the warning it brings there is not the
 * gateway's own output. `npm start` (the demo's tests) still goes through tsx, as people run it.
 */
export const TS_CHILD_FLAGS: readonly string[] = [
  '--experimental-strip-types',
  '--disable-warning=ExperimentalWarning',
]

/**
 * The environment of such a child: the PATH, `env`, and nothing else of the test process's but the run's compile
 * cache (`NODE_COMPILE_CACHE`, set by scripts/run-tests.mjs), so that each child does not compile and strip the
 * gateway's modules again: that is a third of a child's start on Node 24.
 */
export function childEnv(env: Record<string, string>): Record<string, string> {
  const cache = process.env.NODE_COMPILE_CACHE
  return {
    PATH: process.env.PATH ?? '',
    ...(cache === undefined ? {} : { NODE_COMPILE_CACHE: cache }),
    ...env,
  }
}
