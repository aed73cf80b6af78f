import { type SessionFocus, sessionPath } from '../links.ts'
import { base } from './api.ts'
import { h, replace } from './dom.ts'
import { needs, type OverviewChange, type OverviewModel } from './overview-model.ts'

/** Something new that waits for a person, and where its notification leads. */
interface Fresh {
  readonly kasmId: string
  readonly title: string
  readonly body: string
  readonly tag: string
  readonly focus: SessionFocus
}

/**
 * Attention: the tab title counts what waits for a person (open questions and handoff pauses) in the
 * sessions the person may act on, and a browser notification says when a new one appears. Notifications
 * are asked for with a button, never on load; the title counts for everyone who may write.
 */
export class Attention {
  readonly button: HTMLButtonElement
  readonly #model: OverviewModel
  readonly #canAct: boolean
  /** Questions and pauses already known: only new ones notify. */
  readonly #known = new Set<string>()
  #baseTitle = 'Sessions'

  constructor(model: OverviewModel, canAct: boolean) {
    this.#model = model
    this.#canAct = canAct
    this.button = h('button', {
      type: 'button',
      class: 'notify secondary',
      title: 'A browser notification when a question opens or a handoff starts in a session you may act on',
      onclick: () => void this.#ask(),
    })
    this.#label()
    model.subscribe((change) => this.#changed(change))
    this.#changed({ kind: 'ready' })
  }

  /** The page's own title (the count goes in front of it). */
  setTitle(title: string): void {
    this.#baseTitle = title
    this.#title()
  }

  async #ask(): Promise<void> {
    if (typeof Notification === 'undefined') return
    this.button.setAttribute('aria-busy', 'true')
    try {
      await Notification.requestPermission()
    } finally {
      this.button.removeAttribute('aria-busy')
      this.#label()
    }
  }

  #label(): void {
    const b = this.button
    if (!this.#canAct || typeof Notification === 'undefined') {
      b.hidden = true
      return
    }
    const permission = Notification.permission
    b.disabled = permission !== 'default'
    const [long, short] =
      permission === 'granted'
        ? ['Notifications on', 'Notifying']
        : permission === 'denied'
          ? ['Notifications blocked', 'Blocked']
          : ['Turn on notifications', 'Notify me']
    // The short label is for a phone's one-line header; the long one stays the button's name.
    if (b.textContent !== `${long}${short}`)
      replace(
        b,
        h('span', { class: 'long' }, long),
        h('span', { class: 'short', 'aria-hidden': 'true' }, short),
      )
  }

  #changed(change: OverviewChange): void {
    if (change.kind === 'connection') return
    this.#title()
    if (!this.#canAct) return
    const fresh: Fresh[] = []
    for (const entry of this.#model.entries.values()) {
      const s = entry.summary
      if (s === null || s.run === null) continue
      for (const r of s.openRequests) {
        const tag = `${entry.kasmId}\u0000${s.run}\u0000${r.requestId}`
        if (!this.#known.has(tag))
          fresh.push({
            kasmId: entry.kasmId,
            title: `Question in ${entry.kasmId}`,
            body: r.title,
            tag,
            focus: { request: r.requestId, run: s.run },
          })
      }
      if (s.escalation !== null) {
        const tag = `${entry.kasmId}\u0000${s.run}\u0000handoff\u0000${s.escalation.startedAt}`
        if (!this.#known.has(tag))
          fresh.push({
            kasmId: entry.kasmId,
            title: `Handoff in ${entry.kasmId}`,
            body: s.escalation.reason,
            tag,
            focus: { handoff: true },
          })
      }
    }
    for (const f of fresh) this.#known.add(f.tag)
    // What was already open when the page loaded is in the title, not in a notification.
    if (!this.#model.ready || change.kind === 'ready') return
    for (const f of fresh) this.#notify(f)
  }

  #notify(n: Fresh): void {
    if (typeof Notification === 'undefined' || Notification.permission !== 'granted') return
    const note = new Notification(n.title, { body: n.body, tag: n.tag })
    note.onclick = () => {
      window.focus()
      // The notification's question (or the pause) in view, as a webhook's link has it.
      location.assign(sessionPath(base, n.kasmId, n.focus))
    }
  }

  #title(): void {
    let count = 0
    if (this.#canAct) for (const entry of this.#model.entries.values()) count += needs(entry)
    const title = `${count > 0 ? `(${count}) ` : ''}${this.#baseTitle} · kasm-runtime-gateway`
    if (document.title !== title) document.title = title
  }
}
