import { SHARED_REDIS } from '../cluster/redis-harness.ts'
import { cookieStoreContract, memoryCookiePair, redisCookiePair } from './cookie-store-contract.ts'

cookieStoreContract('memory', memoryCookiePair)
cookieStoreContract('redis (two replicas)', redisCookiePair(SHARED_REDIS))
