import { h, setText } from './dom.ts'
import { timeLeft } from './format.ts'

/**
 * A countdown: a `<time>` element the page's one ticker refreshes every second. It reads as one phrase,
 * `4:05 left` by default, or `answer within 4:05` with a prefix and no suffix: never both.
 */
export function countdown(until: string, words: { prefix?: string; suffix?: string } = {}): HTMLTimeElement {
  const prefix = words.prefix ?? ''
  const suffix = words.suffix ?? ' left'
  return h(
    'time',
    { datetime: until, 'data-until': until, 'data-prefix': prefix, 'data-suffix': suffix },
    `${prefix}${timeLeft(until)}${suffix}`,
  )
}

/** Refreshes every countdown on the page (one timer for all of them). */
export function tickCountdowns(): void {
  for (const el of document.querySelectorAll<HTMLTimeElement>('time[data-until]')) {
    setText(el, `${el.dataset.prefix ?? ''}${timeLeft(el.dataset.until ?? '')}${el.dataset.suffix ?? ''}`)
  }
}
