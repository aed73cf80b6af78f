/** Reads a response body as UTF-8, up to `max` bytes; a longer one throws (and is not read further). */
export async function readBounded(body: AsyncIterable<Uint8Array>, max: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += chunk.byteLength
    if (size > max) throw new Error(`response larger than ${max} bytes`)
    chunks.push(Buffer.from(chunk))
  }
  return Buffer.concat(chunks).toString('utf8')
}
