import './console.css'
import { ApiError, api, base, onSignedOut, signIn } from './api.ts'
import { Attention } from './attention.ts'
import { h, replace } from './dom.ts'
import { OverviewModel } from './overview-model.ts'
import { OverviewView, tickCountdowns } from './overview-view.ts'
import { canWrite, type Me, SessionView } from './session.ts'

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
let signingIn = false
onSignedOut(() => {
  if (signingIn) return
  signingIn = true
  signIn()
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
  if (me.roles.length === 0) {
    problemPage(
      'You have no role here',
      'You are signed in, but your account has no role in this gateway (viewer, operator or admin), so it shows you no session. Ask whoever runs your identity provider to grant one, then sign in again.',
      h('button', { type: 'button', onclick: () => void signOut(null) }, 'Sign out'),
    )
    return
  }

  const model = new OverviewModel()
  const attention = new Attention(model, canWrite(me))
  const main = h('main', { id: 'main', tabindex: '-1' })
  const role = me.roles.includes('admin') ? 'admin' : me.roles.includes('operator') ? 'operator' : 'viewer'
  const signOutButton = h(
    'button',
    {
      type: 'button',
      class: 'secondary',
      onclick: () =>
        void signOut(signOutButton, () => {
          view?.destroy()
          model.close()
        }),
    },
    'Sign out',
  )
  replace(
    app,
    h('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    h(
      'header',
      { class: 'bar' },
      h('a', { class: 'brand', href: base }, 'Support console'),
      h('span', { class: 'who' }, `${me.name ?? me.sub} (${role})`),
      attention.button,
      signOutButton,
    ),
    main,
    h('div', { id: 'announcer', class: 'sr-only', 'aria-live': 'polite' }),
  )

  let view: View | null = null
  const route = (focus: boolean): void => {
    view?.destroy()
    const kasmId = sessionFromPath(location.pathname)
    if (kasmId !== null) {
      view = new SessionView(kasmId, model, me, location.hash === '#inbox' ? 'inbox' : 'home')
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

/** Ends the cookie session, stops the page's streams, and says so. */
async function signOut(button: HTMLButtonElement | null, stop?: () => void): Promise<void> {
  signingIn = true
  stop?.()
  if (button !== null) {
    button.disabled = true
    button.setAttribute('aria-busy', 'true')
  }
  try {
    await api(`${base}auth/session`, { method: 'DELETE' })
  } catch {
    // Signed out already, or the gateway is away: nothing more to do here.
  }
  problemPage(
    'Signed out',
    'You have signed out of the support console.',
    h('a', { href: base }, 'Sign in again'),
  )
}

void boot()
