/**
 * An error answer without its `requestId` (each request has its own), as text or as the parsed body, for
 * asserting that two answers are otherwise identical (a foreign session must look exactly like an unknown one).
 */
export function withoutRequestId<T>(answer: T): T {
  if (typeof answer === 'string') return answer.replace(/,"requestId":"[^"]*"/, '') as T
  if (answer === null || typeof answer !== 'object') return answer
  const { requestId: _, ...rest } = answer as Record<string, unknown>
  return rest as T
}
