import { createHash } from 'node:crypto'
import { crc32, deflateSync } from 'node:zlib'

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
const WIDTH = 64
const HEIGHT = 40

function chunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4)
  length.writeUInt32BE(data.length)
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data])
  const crc = Buffer.alloc(4)
  crc.writeUInt32BE(crc32(body))
  return Buffer.concat([length, body, crc])
}

/**
 * A tiny valid PNG (64x40, RGB) standing in for a screenshot. The colours derive from `name`, so each
 * screenshot in the demo looks a little different and the same name always gives the same bytes (which is
 * what lets screenshots be served as immutable).
 */
export function screenshotPng(name: string): Buffer {
  const seed = createHash('sha256').update(name).digest()
  const [r = 0, g = 0, b = 0] = seed
  const raw = Buffer.alloc((WIDTH * 3 + 1) * HEIGHT)
  for (let y = 0; y < HEIGHT; y++) {
    const row = y * (WIDTH * 3 + 1)
    raw[row] = 0 // filter: none
    for (let x = 0; x < WIDTH; x++) {
      const at = row + 1 + x * 3
      // A title bar, then a gradient "page": enough to look like a capture at thumbnail size.
      const bar = y < 6
      raw[at] = bar ? 40 : (r + x * 2) & 0xff
      raw[at + 1] = bar ? 44 : (g + y * 3) & 0xff
      raw[at + 2] = bar ? 52 : (b + x + y) & 0xff
    }
  }
  const header = Buffer.alloc(13)
  header.writeUInt32BE(WIDTH, 0)
  header.writeUInt32BE(HEIGHT, 4)
  header[8] = 8 // bit depth
  header[9] = 2 // colour type: truecolour
  return Buffer.concat([
    SIGNATURE,
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ])
}
