/**
 * Prints a bearer token for the compose demo (deploy/compose.yaml): an operator of every team, valid one hour,
 * signed with the demo's HS256 secret. Run it from the repository (it uses its node_modules):
 *
 *   node deploy/demo-token.mjs            # an operator
 *   node deploy/demo-token.mjs admin      # an admin (the admin API)
 *
 * Uses GATEWAY_JWT_SECRET from the environment when set, as compose does; the fallback is compose's demo value.
 */
import { SignJWT } from 'jose'

const secret = process.env.GATEWAY_JWT_SECRET || 'demo-only-jwt-secret-0123456789abcdefghijkl'
const role = process.argv[2] === 'admin' ? 'admin' : 'operator'

const token = await new SignJWT({ roles: [role], teams: ['*'], name: `Demo ${role}` })
  .setProtectedHeader({ alg: 'HS256' })
  .setSubject(`demo-${role}`)
  .setIssuer('kasm-runtime-gateway-demo')
  .setAudience('kasm-runtime-gateway')
  .setIssuedAt()
  .setExpirationTime('1h')
  .sign(new TextEncoder().encode(secret))
process.stdout.write(`${token}\n`)
