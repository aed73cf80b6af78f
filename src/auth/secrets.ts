import { randomBytes } from 'node:crypto'
import { type Config, ConfigError } from '../config.ts'

/** The secrets auth runs with, after filling in what a non-production boot left unset. */
export interface AuthSecrets {
  /** HS256 secret; undefined when only a JWKS verifies tokens. */
  jwtSecret: string | undefined
  /** Cookie signing secrets: the first signs, all verify (rotation). */
  cookieSecrets: string[]
  /** Variables that were unset and got a random value for this process only. */
  generated: string[]
}

/**
 * Outside production (the demo, a laptop) neither secret has to be configured: a random one is generated
 * per process. Nobody can mint bearer tokens for a random HS256 secret (sign in with a login ticket), and
 * cookie sessions end when the process does and are not shared between replicas. Production config is
 * refused at boot without them (config.ts); this throws too, in case that check is ever loosened.
 */
export function resolveAuthSecrets(config: Config): AuthSecrets {
  const { env } = config
  const generated: string[] = []
  let jwtSecret = env.GATEWAY_JWT_SECRET
  if (jwtSecret === undefined && env.GATEWAY_JWKS_URL === undefined) {
    if (config.production) {
      throw new ConfigError('invalid configuration: GATEWAY_JWT_SECRET or GATEWAY_JWKS_URL is required')
    }
    jwtSecret = randomBytes(32).toString('base64url')
    generated.push('GATEWAY_JWT_SECRET')
  }
  let cookieSecrets = env.GATEWAY_COOKIE_SECRET
  if (cookieSecrets === undefined || cookieSecrets.length === 0) {
    if (config.production) throw new ConfigError('invalid configuration: GATEWAY_COOKIE_SECRET is required')
    cookieSecrets = [randomBytes(32).toString('base64url')]
    generated.push('GATEWAY_COOKIE_SECRET')
  }
  return { jwtSecret, cookieSecrets, generated }
}
