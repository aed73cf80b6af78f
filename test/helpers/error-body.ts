/**
 * An error answer's text without its `requestId` (each request has its own), for asserting that two answers
 * are otherwise identical (a foreign session must look exactly like an unknown one).
 */
export function withoutRequestId(text: string): string {
  return text.replace(/,"requestId":"[^"]*"/, '')
}
