import { h, uid } from './dom.ts'

/** What a confirmation asks, and its two answers. */
export interface ConfirmOptions {
  /** The question, in bold ("Stop the agent?"). */
  readonly question: string
  /** What happens if the person goes on. */
  readonly detail: string
  /** The answer that changes nothing; it has the keyboard when the question is asked. */
  readonly keep: string
  /** The answer that goes on. */
  readonly go: string
  /** The go answer is destructive (styled as a danger). */
  readonly danger?: boolean
  readonly onGo: () => void
  /** The person kept things as they are (the keep answer or Escape). */
  readonly onKeep: () => void
}

/**
 * A question asked in place before a step that cannot be undone (Stop, "I'm done, finish", an empty answer):
 * a labelled group with the question, what going on does, and two answers, the one that changes nothing
 * first and focused. Escape anywhere in it is the keep answer. The owner hides its own trigger while asked.
 */
export class Confirm {
  readonly el: HTMLElement
  readonly #keep: HTMLButtonElement

  constructor(o: ConfirmOptions) {
    const textId = uid('confirm')
    this.#keep = h('button', { type: 'button', class: 'secondary', onclick: () => o.onKeep() }, o.keep)
    this.el = h(
      'div',
      { class: 'confirm', role: 'group', 'aria-labelledby': textId, hidden: true },
      h('p', { id: textId }, h('strong', {}, `${o.question} `), o.detail),
      h(
        'div',
        { class: 'actions' },
        this.#keep,
        h('button', { type: 'button', class: o.danger ? 'danger' : null, onclick: () => o.onGo() }, o.go),
      ),
    )
    this.el.addEventListener('keydown', (e) => {
      if (e.key !== 'Escape') return
      e.preventDefault()
      o.onKeep()
    })
  }

  /** The question is on screen. */
  get asking(): boolean {
    return !this.el.hidden
  }

  /** Shows the question with the keyboard on the answer that changes nothing. */
  ask(): void {
    this.el.hidden = false
    this.#keep.focus()
  }

  hide(): void {
    this.el.hidden = true
  }
}
