/**
 * Lists a sampling heap profile (`heap-sample.mjs`) by allocation site, the most bytes first: the function,
 * its file and line, and the bytes still alive. Usage: `node bench/probes/heap-top.mjs <file> [count, 25]`.
 */
import { readFileSync } from 'node:fs'

const [file, countArg] = process.argv.slice(2)
if (file === undefined) throw new Error('usage: heap-top.mjs <file.heapprofile> [count]')
const profile = JSON.parse(readFileSync(file, 'utf8'))
const bySite = new Map()
const walk = (node) => {
  const { functionName, url, lineNumber } = node.callFrame
  const site = `${functionName || '(anonymous)'} ${url.split('/').pop()}:${lineNumber + 1}`
  bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize)
  for (const child of node.children) walk(child)
}
walk(profile.head)
const total = [...bySite.values()].reduce((a, b) => a + b, 0)
console.log(`${total} bytes alive of what was allocated while sampling`)
for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, Number(countArg ?? 25))) {
  if (bytes > 0) console.log(`${String(bytes).padStart(10)}  ${site}`)
}
