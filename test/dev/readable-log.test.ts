import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import pino from 'pino'
import { loadConfig } from '../../src/config.ts'
import { readableLine, readableLog } from '../../src/dev/readable-log.ts'
import { loggerOptions } from '../../src/logger.ts'
import { testEnv } from '../helpers/jwt.ts'

test("the demo's lines: time, level, message and the record's own fields; the process's fields left out; an error's stack indented", () => {
  const out = new PassThrough()
  let text = ''
  out.on('data', (c: Buffer) => {
    text += c.toString()
  })
  const options = loggerOptions(loadConfig(testEnv({ LOG_LEVEL: 'info' })), readableLog(out)) as {
    stream: pino.DestinationStream
  } & pino.LoggerOptions
  const log = pino(options, options.stream)
  log.info({ kasmId: 'demo', note: 'two words', n: 3, token: 'secret-value' }, 'reader started')
  const err = new Error('upstream refused')
  log.error({ err }, 'reader failed')
  const [first, second, ...stack] = text.trimEnd().split('\n')
  assert.match(
    first ?? '',
    /^\d\d:\d\d:\d\d INFO {2}reader started {2}kasmId=demo note="two words" n=3 token=\[redacted\]$/,
  )
  assert.match(second ?? '', /^\d\d:\d\d:\d\d ERROR reader failed$/)
  assert.equal(stack[0], '    Error: upstream refused')
  assert.ok(stack.length > 1 && stack.slice(1).every((l) => /^ {4}\s*at /.test(l)), stack.join('\n'))
  assert.doesNotMatch(text, /hostname|pid|service|version|\{/)
})

test('a line that is not a record passes as it came', () => {
  assert.equal(readableLine('not json\n'), 'not json\n')
  assert.equal(readableLine('[1,2]\n'), '[1,2]\n')
})
