import './console.css'
import { focusOf } from '../links.ts'
import { ApiError, api, base, onSignedOut } from './api.ts'
import { Attention } from './attention.ts'
import { chatLinks } from './chat-links.ts'
import { tickCountdowns } from './countdown.ts'
import { h, replace } from './dom.ts'
import { OverviewModel } from './overview-model.ts'
import { OverviewView } from './overview-view.ts'
import { canWrite, type Me, SessionView } from './session.ts'
import { signOutForm } from './sign-out.ts'

/**
 * The support console: the overview of every session the person may see at `<base>`, one session at
 * `<base>sessions/<kasm_id>`. Navigation between them stays in the page (the overview's stream stays open),
 * so the page holds at most two long-lived connections: the overview and the session on screen.
 */

interface View {
  readonly el: HTMLElement
  destroy(): void
}

const app = document.getElementById('app') as HTMLElement
/** Leaving the page (signed out here, or on the way to sign in): a 401 needs no answer any more. */
let leaving = false
// Signed out meanwhile: load this page again, so the gateway answers it as it answers any navigation (off to
// sign in and back here, or the page saying why not). One place decides where a signed-out person goes.
onSignedOut(() => {
  if (leaving) return
  leaving = true
  location.reload()
})

function sessionFromPath(path: string): string | null {
  if (!path.startsWith(`${base}sessions/`)) return null
  const rest = path.slice(`${base}sessions/`.length)
  if (rest === '' || rest.includes('/')) return null
  try {
    return decodeURIComponent(rest)
  } catch {
    return null
  }
}

function problemPage(title: string, text: string, action?: HTMLElement): void {
  replace(
    app,
    h('main', { class: 'problem', id: 'main' }, h('h1', {}, title), h('p', {}, text), action ?? null),
  )
  document.title = `${title} · kasm-runtime-gateway`
}

async function boot(): Promise<void> {
  let me: Me
  try {
    me = await api<Me>(`${base}auth/me`)
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return // on its way to sign in
    problemPage(
      'The console cannot start',
      `The gateway did not say who you are (${err instanceof Error ? err.message : 'unknown error'}).`,
      h('button', { type: 'button', onclick: () => location.reload() }, 'Try again'),
    )
    return
  }
  // The gateway serves the page only to someone with a role (the no-role page otherwise).
  const model = new OverviewModel()
  const attention = new Attention(model, canWrite(me))
  const main = h('main', { id: 'main', tabindex: '-1' })
  const role = me.roles.includes('admin') ? 'admin' : me.roles.includes('operator') ? 'operator' : 'viewer'
  const who = `${me.name ?? me.sub} (${role})`
  const signOut = signOutForm(who, () => {
    leaving = true
    view?.destroy()
    model.close()
  })
  replace(
    app,
    h('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    h(
      'header',
      { class: 'bar' },
      // On a phone the brand is short so that the header stays one line; its name stays the full one.
      h(
        'a',
        { class: 'brand', href: base, 'aria-label': 'Support console' },
        h('span', { class: 'long' }, 'Support console'),
        h('span', { class: 'short', 'aria-hidden': 'true' }, 'Console'),
      ),
      canWrite(me) ? h('a', { class: 'report-link', href: `${base}report` }, 'Report') : null,
      h('span', { class: 'who' }, who),
      attention.button,
      chatLinks(),
      signOut,
    ),
    main,
    h('div', { id: 'announcer', class: 'sr-only', 'aria-live': 'polite' }),
  )

  let view: View | null = null
  const route = (focus: boolean): void => {
    view?.destroy()
    const kasmId = sessionFromPath(location.pathname)
    if (kasmId !== null) {
      const hash = location.hash.slice(1)
      view = new SessionView(kasmId, model, me, {
        tab: hash === 'inbox' || hash === 'timeline' || hash === 'home' ? hash : null,
        focus: focusOf(location.search),
      })
      attention.setTitle(kasmId)
    } else {
      view = new OverviewView(model)
      attention.setTitle('Sessions')
    }
    replace(main, view.el)
    if (focus) (main.querySelector('h1') as HTMLElement | null)?.focus()
  }

  // Links inside the console change the view without a reload: the overview's stream stays open.
  document.addEventListener('click', (e) => {
    const a = (e.target as Element | null)?.closest?.('a')
    if (
      a === null ||
      a === undefined ||
      e.defaultPrevented ||
      e.button !== 0 ||
      e.metaKey ||
      e.ctrlKey ||
      e.shiftKey ||
      e.altKey
    )
      return
    const url = new URL(a.href, location.href)
    if (url.origin !== location.origin || a.hasAttribute('download')) return
    if (url.pathname !== base && sessionFromPath(url.pathname) === null) return
    e.preventDefault()
    if (url.pathname !== location.pathname) history.pushState(null, '', url)
    route(true)
  })
  window.addEventListener('popstate', () => route(true))
  setInterval(tickCountdowns, 1000)
  route(false)
}

void boot()
