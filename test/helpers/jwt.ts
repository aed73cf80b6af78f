import { SignJWT } from 'jose'

/** The HS256 secret every test gateway is configured with (see {@link testEnv}). */
export const TEST_JWT_SECRET = 'test-secret-that-is-long-enough-for-hs256-0123456789'
export const TEST_ISSUER = 'https://idp.test'
export const TEST_AUDIENCE = 'kasm-runtime-gateway'

export interface TestClaims {
  sub?: string
  roles?: string[]
  teams?: string[]
  [claim: string]: unknown
}

/** Signs a valid HS256 bearer for the test gateway; override anything to build a bad one. */
export async function bearer(
  claims: TestClaims = {},
  opts: { expiresIn?: string | number; secret?: string } = {},
) {
  const { sub = 'alice', roles = ['operator'], teams = ['*'], ...rest } = claims
  return new SignJWT({ roles, teams, ...rest })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(sub)
    .setIssuer(TEST_ISSUER)
    .setAudience(TEST_AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(opts.expiresIn ?? '10m')
    .sign(new TextEncoder().encode(opts.secret ?? TEST_JWT_SECRET))
}

/** Environment for a test gateway: HS256 auth, quiet logs, no demo. Spread overrides over it. */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    GATEWAY_DEMO: 'off',
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    GATEWAY_JWT_ISSUER: TEST_ISSUER,
    GATEWAY_JWT_AUDIENCE: TEST_AUDIENCE,
    GATEWAY_COOKIE_SECRET: 'cookie-secret-for-tests-0123456789abcdef',
    GATEWAY_PUBLIC_ORIGIN: 'http://gateway.test',
    // Test runtimes listen on loopback, which the URL policy refuses for admin-registered upstreams unless the
    // deployer allows it: here every address is (test/upstream/*url-policy*, admin-upstream test the policy).
    GATEWAY_UPSTREAM_ALLOW: '0.0.0.0/0,::/0',
    // A test process on a loaded machine can stall past the shedding threshold and answer 503 overloaded to a
    // test about something else; test/http/load-shedding.test.ts turns shedding on where it is the subject.
    GATEWAY_OVERLOAD_LOOP_DELAY_MS: '0',
    ...overrides,
  }
}
