import { Secret } from '../sessions/secret.ts'

/**
 * Seals a secret bound to an id, and opens it again for that id only. In cluster mode this is the
 * TokenVault (JWE `dir`/`A256GCM` with GATEWAY_ENCRYPTION_KEY), so what sits in Redis is unreadable; a
 * single replica keeps secrets in its own memory and uses {@link inProcess}.
 */
export interface Sealer {
  seal(id: string, secret: Secret): Promise<string>
  open(id: string, sealed: string): Promise<Secret>
}

/** The {@link Sealer} of a single replica: nothing leaves the process, so nothing needs encrypting. */
export const inProcess: Sealer = {
  seal: async (_id, secret) => secret.reveal(),
  open: async (_id, sealed) => new Secret(sealed),
}
