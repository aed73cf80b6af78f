import './chat-links.css'
import { ApiError, api, base } from './api.ts'
import { announce, h, replace } from './dom.ts'

/** A linked chat account, as `GET <base>api/chat-links` lists it. */
interface ChatLink {
  chat: string
  workspace: string
  workspaceName?: string
  user: string
  userName?: string
  state: 'active' | 'suspended'
  expiresAt: string
}

const chatNames: Record<string, string> = { slack: 'Slack', msteams: 'Teams' }

/**
 * The person's linked chat accounts (a Slack account their answers in Slack carry), in the console's bar: a
 * disclosure naming the account, with when it ends and a Disconnect button. Nothing shows until one exists
 * (a gateway without a chat adapter lists none). Self-contained: one element to mount.
 */
export function chatLinks(): HTMLElement {
  const root = h('div', { class: 'chat-links', hidden: true })
  void load(root)
  return root
}

async function load(root: HTMLElement): Promise<void> {
  let links: ChatLink[]
  try {
    links = (await api<{ links: ChatLink[] }>(`${base}api/chat-links`)).links
  } catch {
    // Not now (the gateway did not answer): nothing to show; a reload asks again.
    return
  }
  render(root, links)
}

function render(root: HTMLElement, links: ChatLink[]): void {
  root.hidden = links.length === 0
  replace(root, ...links.map((link) => item(root, links, link)))
}

function item(root: HTMLElement, links: ChatLink[], link: ChatLink): HTMLElement {
  const chat = chatNames[link.chat] ?? link.chat
  const who = link.userName === undefined ? link.user : `@${link.userName}`
  const where = link.workspaceName ?? link.workspace
  const status = h('p', { class: 'chat-link-status', role: 'status' })
  const button = h('button', { type: 'button', class: 'secondary' }, 'Disconnect')
  button.addEventListener('click', () => {
    button.disabled = true
    button.setAttribute('aria-busy', 'true')
    const path = `${base}api/chat-links/${[link.chat, link.workspace, link.user].map(encodeURIComponent).join('/')}`
    api(path, { method: 'DELETE' }).then(
      () => {
        announce(`${chat} account ${who} disconnected`)
        render(
          root,
          links.filter((l) => l !== link),
        )
      },
      (err: unknown) => {
        button.disabled = false
        button.removeAttribute('aria-busy')
        status.textContent = `Not disconnected: ${err instanceof ApiError ? err.message : 'the gateway did not answer'}`
      },
    )
  })
  const until = new Date(link.expiresAt).toLocaleDateString(undefined, { dateStyle: 'medium' })
  return h(
    'details',
    { class: 'chat-link' },
    h('summary', {}, `${chat}: ${who}`, link.state === 'suspended' ? ' (suspended)' : ''),
    h(
      'div',
      { class: 'chat-link-panel' },
      h(
        'p',
        {},
        link.state === 'suspended'
          ? `Your ${chat} account ${who} in ${where} is suspended: your identity provider did not renew its sign-in. Answer a question in ${chat} to connect it again.`
          : `Your ${chat} account ${who} in ${where} answers questions as you until ${until}.`,
      ),
      button,
      status,
    ),
  )
}
