/**
 * `npm run favicon`: renders the console's icon (src/console/page/icon.svg) into src/pages/favicon.ico, what the
 * gateway answers at `<base>favicon.ico`: one 32×32 PNG in an ICO container, which every browser reads (Safari
 * too, which takes no SVG icon). The Chromium the tests use draws it, so the file is a rendering of the SVG,
 * not a second drawing of it; test/pages/favicon.chromium.test.ts fails when it no longer matches the SVG.
 */

import { readFile, writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import type { Browser } from 'playwright-core'
import { launchChromium } from '../test/helpers/chromium.ts'

/** The icon's source and the file rendered from it. */
export const ICON_SVG = new URL('../src/console/page/icon.svg', import.meta.url)
export const FAVICON_ICO = new URL('../src/pages/favicon.ico', import.meta.url)
/** Its width and height in pixels. */
export const FAVICON_SIZE = 32

/** `png` (square, `size` pixels a side) as an ICO file: a header, one directory entry, the PNG. */
export function icoOf(png: Buffer, size: number): Buffer {
  const header = Buffer.alloc(6 + 16)
  header.writeUInt16LE(0, 0) // reserved
  header.writeUInt16LE(1, 2) // an icon (2 is a cursor)
  header.writeUInt16LE(1, 4) // one image
  header.writeUInt8(size % 256, 6) // width; 0 means 256
  header.writeUInt8(size % 256, 7) // height
  header.writeUInt8(0, 8) // no palette
  header.writeUInt8(0, 9) // reserved
  header.writeUInt16LE(1, 10) // colour planes
  header.writeUInt16LE(32, 12) // bits per pixel
  header.writeUInt32LE(png.length, 14)
  header.writeUInt32LE(header.length, 18) // where the PNG starts
  return Buffer.concat([header, png])
}

/** The SVG drawn at `size` pixels, transparent around its rounded corners, as a PNG. */
export async function renderSvg(browser: Browser, svg: Buffer, size: number): Promise<Buffer> {
  const page = await browser.newPage({ viewport: { width: size, height: size }, deviceScaleFactor: 1 })
  try {
    const src = `data:image/svg+xml;base64,${svg.toString('base64')}`
    await page.setContent(
      `<body style="margin:0"><img src="${src}" width="${size}" height="${size}" alt=""></body>`,
    )
    await page.evaluate('document.images[0].decode()')
    return await page.screenshot({ omitBackground: true, clip: { x: 0, y: 0, width: size, height: size } })
  } finally {
    await page.close()
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const browser = await launchChromium()
  try {
    const png = await renderSvg(browser, await readFile(ICON_SVG), FAVICON_SIZE)
    const ico = icoOf(png, FAVICON_SIZE)
    await writeFile(FAVICON_ICO, ico)
    process.stdout.write(`${fileURLToPath(FAVICON_ICO)}: ${ico.length} B\n`)
  } finally {
    await browser.close()
  }
}
