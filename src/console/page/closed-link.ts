import { whoAnswered } from './api.ts'
import { h, replace, uid } from './dom.ts'
import { timeOf } from './format.ts'
import { closedByText } from './labels.ts'
import type { RequestRecord } from './records.ts'

/** A link's question: its id, and the run it was asked in when the link says (src/console/links.ts). */
export interface LinkedQuestion {
  readonly request: string
  readonly run?: string
}

/** Where the note's buttons take the person; null when there is nothing there. */
export interface NoteWays {
  /** The closed question's card in this run's Inbox. */
  readonly closed: (() => void) | null
  /** The open question due first, and how many are open. */
  readonly open: (() => void) | null
  readonly openCount: number
}

/**
 * What a deep link to a question that is no longer open says, above the session's tabs: "That question has
 * closed", and what became of it as far as the console can know: how it closed and who answered it (this
 * run's record, the gateway's audit log), or that it belonged to another run (a notification from before a
 * new run that counted its questions from `q1` again). The page never opens another question in its place
 * unasked: the note offers the open one.
 */
export class ClosedLinkNote {
  readonly el: HTMLElement
  readonly #kasmId: string
  readonly #title: HTMLElement
  readonly #body: HTMLElement
  readonly #ways: HTMLElement
  readonly #dismissed: () => void
  #shown = 0

  /** `dismissed`: where the keyboard goes when the person dismisses the note. */
  constructor(kasmId: string, dismissed: () => void) {
    this.#kasmId = kasmId
    this.#dismissed = dismissed
    const titleId = uid('closed-link')
    this.#title = h('h2', { id: titleId }, 'That question has closed')
    this.#body = h('p', {})
    this.#ways = h('p', { class: 'link-note-ways' })
    this.el = h(
      'section',
      { class: 'link-note', 'aria-labelledby': titleId, tabindex: '-1', hidden: true },
      this.#title,
      this.#body,
      this.#ways,
    )
  }

  /**
   * Says what became of `link`'s question, then puts the keyboard on the note (unless the person has moved
   * it meanwhile). `run` is the session's run now; `record` the question's, when it is one of that run.
   */
  async show(link: LinkedQuestion, run: string, record: RequestRecord | null, ways: NoteWays): Promise<void> {
    const shown = ++this.#shown
    const focused = document.activeElement
    const otherRun = record === null && link.run !== undefined && link.run !== run
    // Who answered: the gateway's audit log knows it for any run, an earlier one too.
    const answer =
      record?.closed_by === 'reply' || otherRun
        ? await whoAnswered(this.#kasmId, link.run ?? run, link.request)
        : null
    if (shown !== this.#shown) return
    const id = h('code', {}, link.request)
    if (record !== null) {
      const at = answer?.at ?? record.closed_at
      const time = at === undefined ? null : timeOf(at)
      replace(
        this.#body,
        id,
        ` “${record.title}”: `,
        record.closed_by === 'reply'
          ? answer === null
            ? 'answered outside the gateway or before its records'
            : `answered by ${answer.name}`
          : closedByText(record.closed_by),
        time === null ? '' : ' at ',
        time,
        '.',
      )
    } else if (otherRun) {
      replace(
        this.#body,
        id,
        ' was asked in run ',
        h('code', {}, link.run ?? ''),
        ', which is over: the session runs ',
        h('code', {}, run),
        ' now. ',
        ...(answer === null
          ? ['The gateway has no answer to it on record: it timed out, was cancelled or closed with its run.']
          : [`${answer.name} answered it at `, timeOf(answer.at), '.']),
      )
    } else
      replace(
        this.#body,
        'The session’s run now (',
        h('code', {}, run),
        ') has no question ',
        id,
        ': the link is from an earlier run, which is over, or it is mistyped.',
      )
    const go = (label: string, to: () => void) =>
      h(
        'button',
        {
          type: 'button',
          class: 'secondary',
          onclick: () => {
            this.hide()
            to()
          },
        },
        label,
      )
    replace(
      this.#ways,
      ways.open === null
        ? null
        : go(
            ways.openCount === 1 ? 'Go to the open question' : `Go to the ${ways.openCount} open questions`,
            ways.open,
          ),
      ways.closed === null ? null : go('Show the closed question', ways.closed),
      go('Dismiss', this.#dismissed),
    )
    this.el.hidden = false
    // Where the person lands, unless they moved the keyboard themselves while the answer was looked up.
    if (document.activeElement === focused) this.el.focus()
  }

  /** The note goes (the person went where they wanted). */
  hide(): void {
    this.#shown++
    this.el.hidden = true
  }
}
