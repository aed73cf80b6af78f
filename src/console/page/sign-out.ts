import { base } from './api.ts'
import { h } from './dom.ts'

/**
 * Sign out: a form posted to `auth/logout` (CSRF-checked there), which ends the cookie session on every
 * replica and goes on to the identity provider to end the person's session there too, then back to the
 * signed-out page. `leave` runs first (the page closes its streams and stops reloading itself: their ending
 * must not send the page to sign in).
 */
export function signOutForm(who: string, leave: () => void): HTMLFormElement {
  const button = h('button', { type: 'submit', class: 'secondary', title: `Signed in as ${who}` }, 'Sign out')
  return h(
    'form',
    {
      method: 'post',
      action: `${base}auth/logout`,
      class: 'sign-out',
      onsubmit: () => {
        leave()
        button.disabled = true
        button.setAttribute('aria-busy', 'true')
      },
    },
    button,
  )
}
