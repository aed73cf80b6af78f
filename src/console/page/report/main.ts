import './report.css'
import type { Report } from '../../../report/stats.ts'
import { ApiError, api, base, onSignedOut } from '../api.ts'
import { announce, h, replace } from '../dom.ts'
import { clock } from '../format.ts'
import { signOutForm } from '../sign-out.ts'
import { reportView } from './view.ts'

/**
 * The team report at `<base>report` (operators and admins; the gateway serves it to nobody else): the last
 * 24 hours or 7 days of the person's teams, or one of them, from `GET <base>api/report`, refreshed every
 * minute while the page is visible; the choice is in the URL (`?window=7d&team=red`), so it can be shared.
 * The CSV of the same choice is a download link.
 */

interface Me {
  sub: string
  name?: string
  roles: string[]
  teams: string[]
}

type Window = '24h' | '7d'

const REFRESH_MS = 60_000
const WINDOWS: readonly { value: Window; label: string }[] = [
  { value: '24h', label: 'Last 24 hours' },
  { value: '7d', label: 'Last 7 days' },
]

const app = document.getElementById('app') as HTMLElement
let leaving = false
// Signed out meanwhile: load the page again, so the gateway answers it as any navigation (to sign in and back).
onSignedOut(() => {
  if (leaving) return
  leaving = true
  location.reload()
})

function chosen(): { window: Window; team: string | null } {
  const params = new URLSearchParams(location.search)
  const window = params.get('window') === '7d' ? '7d' : '24h'
  const team = params.get('team')
  return { window, team: team === null || team === '' ? null : team }
}

function query(choice: { window: Window; team: string | null }): string {
  const params = new URLSearchParams({ window: choice.window })
  if (choice.team !== null) params.set('team', choice.team)
  return params.toString()
}

async function boot(): Promise<void> {
  let me: Me
  try {
    me = await api<Me>(`${base}auth/me`)
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return
    replace(
      app,
      h(
        'main',
        { class: 'problem', id: 'main' },
        h('h1', {}, 'The report cannot start'),
        h('p', {}, err instanceof Error ? err.message : 'unknown error'),
      ),
    )
    return
  }
  const choice = chosen()
  const main = h('main', { id: 'main', tabindex: '-1' })
  const status = h('p', { class: 'muted report-status', role: 'status' })
  const body = h('div', { 'aria-busy': 'true' })
  const csv = h('a', { class: 'csv', download: '' }, 'Download CSV')

  const periods = h(
    'fieldset',
    { class: 'periods' },
    h('legend', {}, 'Period'),
    ...WINDOWS.map((w) =>
      h(
        'label',
        {},
        h('input', {
          type: 'radio',
          name: 'window',
          value: w.value,
          checked: w.value === choice.window,
          onchange: () => {
            choice.window = w.value
            void load(true)
          },
        }),
        w.label,
      ),
    ),
  )
  const teamSelect = h(
    'select',
    {
      id: 'team',
      onchange: (e: Event) => {
        const value = (e.target as HTMLSelectElement).value
        choice.team = value === '' ? null : value
        void load(true)
      },
    },
    h('option', { value: '' }, 'All my teams'),
  )
  replace(
    app,
    h('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    h(
      'header',
      { class: 'bar' },
      h(
        'a',
        { class: 'brand', href: base, 'aria-label': 'Support console' },
        h('span', { class: 'long' }, 'Support console'),
        h('span', { class: 'short', 'aria-hidden': 'true' }, 'Console'),
      ),
      h(
        'nav',
        { 'aria-label': 'Console' },
        h('a', { href: base }, 'Sessions'),
        h('a', { href: `${base}report`, 'aria-current': 'page' }, 'Report'),
      ),
      h('span', { class: 'who' }, me.name ?? me.sub),
      signOutForm(me.name ?? me.sub, () => {
        leaving = true
      }),
    ),
    main,
    h('div', { id: 'announcer', class: 'sr-only', 'aria-live': 'polite' }),
  )
  replace(
    main,
    h('h1', {}, 'Team report'),
    h(
      'p',
      { class: 'muted intro' },
      'How the team answers: questions the runs asked, how many were answered before their deadline, how long answers took, which timed out, and how long handoffs waited. Counted from the sessions the gateway watched.',
    ),
    h(
      'div',
      { class: 'report-controls' },
      periods,
      h('div', { class: 'team-choice' }, h('label', { for: 'team' }, 'Team'), teamSelect),
      csv,
    ),
    status,
    body,
  )

  let view: { destroy(): void } | null = null
  let loading: Promise<void> | null = null
  let timer: ReturnType<typeof setTimeout> | null = null

  const load = (changed: boolean): Promise<void> => {
    loading ??= (async () => {
      const q = query(choice)
      if (changed) history.replaceState(null, '', `${base}report?${q}`)
      csv.setAttribute('href', `${base}api/report.csv?${q}`)
      body.setAttribute('aria-busy', 'true')
      try {
        const report = await api<Report>(`${base}api/report?${q}`)
        view?.destroy()
        const next = reportView(report)
        view = next
        replace(body, next.el)
        fillTeams(report)
        status.textContent = `Updated ${clock(report.to)}.`
        if (changed)
          announce(`Report for the ${choice.window === '7d' ? 'last 7 days' : 'last 24 hours'} shown.`)
      } catch (err) {
        if (err instanceof ApiError && err.status === 404 && choice.team !== null) {
          // A team from an old link that the person no longer sees: show all of theirs instead.
          choice.team = null
          loading = null
          return load(true)
        }
        status.textContent = `The report could not be loaded: ${err instanceof Error ? err.message : 'unknown error'}. It is tried again in a minute.`
      } finally {
        body.setAttribute('aria-busy', 'false')
        loading = null
        schedule()
      }
    })()
    return loading
  }

  /** The team choices: the person's teams as the report found them, the chosen one kept. */
  const fillTeams = (report: Report): void => {
    const known = new Set([...teamSelect.options].map((o) => o.value))
    const teams = choice.team === null ? report.teams.map((t) => t.team) : [choice.team]
    for (const team of teams) if (!known.has(team)) teamSelect.append(h('option', { value: team }, team))
    teamSelect.value = choice.team ?? ''
  }

  const schedule = (): void => {
    if (timer !== null) clearTimeout(timer)
    timer = setTimeout(() => {
      if (document.visibilityState === 'visible') void load(false)
      else schedule()
    }, REFRESH_MS)
  }
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') void load(false)
  })
  await load(false)
}

void boot()
