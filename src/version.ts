import { createRequire } from 'node:module'

/**
 * The gateway's version, from the package.json beside `src/` (or `dist/` in the image, which copies it): one
 * source for logs (`version`), `krg_build_info` and anything else that reports it.
 */
export const version: string = (createRequire(import.meta.url)('../package.json') as { version: string })
  .version

/** The service name in every log line and in metrics that name the service. */
export const serviceName = 'kasm-runtime-gateway'
