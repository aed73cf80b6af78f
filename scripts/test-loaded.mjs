#!/usr/bin/env node
/**
 * `npm run test:loaded -- [--runs 3] [--hogs 1] [--second-leg]`: the whole suite (`npm test`; with
 * `--second-leg`, what CI's second leg runs: `npm run test:files -- --second-leg`) several times in a row, each
 * beside CPU hogs (child processes spinning on the CPU), stopping at the first failure. It shows that the
 * suite's tests wait for conditions and not for a fast machine: CONTRIBUTING.md, "Waiting in tests".
 * Prints each run's result and time; exits with the first failing run's status.
 */
import { spawn } from 'node:child_process'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    hogs: { type: 'string', default: '1' },
    'second-leg': { type: 'boolean', default: false },
  },
})
const runs = Number(values.runs)
const hogs = Number(values.hogs)
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(hogs) || hogs < 0) {
  console.error('usage: npm run test:loaded -- [--runs N >= 1] [--hogs N >= 0] [--second-leg]')
  process.exit(2)
}

/** A process that keeps one core busy until it is killed. */
function hog() {
  return spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' })
}

const command = values['second-leg'] ? ['run', 'test:files', '--', '--second-leg'] : ['test']

/** Runs the suite (`npm test`, or the second leg's) with the console as its output; resolves its exit status. */
function suite() {
  return new Promise((resolve) => {
    const child = spawn('npm', command, { stdio: 'inherit' })
    child.once('exit', (code, signal) => resolve(code ?? (signal === null ? 1 : 128)))
  })
}

const spinning = Array.from({ length: hogs }, hog)
const stop = () => {
  for (const child of spinning) child.kill('SIGKILL')
}
process.once('SIGINT', () => {
  stop()
  process.exit(130)
})

const results = []
let status = 0
for (let run = 1; run <= runs && status === 0; run++) {
  const started = Date.now()
  status = await suite()
  const minutes = ((Date.now() - started) / 60_000).toFixed(1)
  results.push(`run ${run}: ${status === 0 ? 'passed' : `failed (exit ${status})`} in ${minutes} min`)
}
stop()
console.log(
  `\nnpm ${command.join(' ')} on node ${process.version}, ${hogs} CPU hog(s) beside it:\n${results.join('\n')}`,
)
process.exit(status)
