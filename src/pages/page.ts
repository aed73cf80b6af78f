import { escapeHtml, htmlDocument } from './document.ts'

/**
 * A small server-rendered page for a person: a title, what happened, what to do next. Every string is
 * escaped when rendered, so an error message or a name from an identity provider can never become markup.
 */
export interface Page {
  /** HTTP status the page is sent with. */
  readonly status: number
  /** The `<title>` and the page's one `<h1>`. */
  readonly title: string
  /** The first paragraph: what happened, in a sentence. */
  readonly lead: string
  /** Further paragraphs (what it means, what to do). */
  readonly details?: readonly string[]
  /** Links offered, most useful first (the first is drawn as the main button). */
  readonly actions?: readonly PageAction[]
  /**
   * A form with one button, posted to `action` (relative to the base path) and drawn before the links as the
   * main button: what a page asks the person to confirm. Same-origin, so the gateway's CSRF rule admits it.
   */
  readonly form?: { readonly action: string; readonly label: string; readonly input?: PageInput }
  /** The stable error code, shown small so a person can quote it to their administrator. */
  readonly code?: string
  /**
   * Go on to this same-origin path at once (`<meta http-equiv="refresh">`, no script): a navigation the page
   * itself starts, so the browser treats it as same-site and sends SameSite=Strict cookies with it.
   */
  readonly continueTo?: string
}

/** The one text field a page's form may have (a code to type), with what was wrong with the last one. */
export interface PageInput {
  readonly name: string
  readonly label: string
  /** `one-time-code`, … */
  readonly autocomplete: string
  readonly inputmode: 'numeric' | 'text'
  readonly maxLength: number
  /** Why the value sent last was refused, shown under the field and tied to it. */
  readonly error?: string
}

/**
 * A link on a page: `to` is relative to GATEWAY_BASE_PATH (`auth/login?return_to=%2F`, or `''` for the
 * console; the renderer prefixes the base, so page builders never need to know it), `href` a path of this
 * origin as it stands (where a sign-in returns to).
 */
export type PageAction = { readonly label: string } & ({ readonly to: string } | { readonly href: string })

/**
 * Renders `page` as a complete HTML document. `basePath` (GATEWAY_BASE_PATH, with its trailing `/`) locates
 * the stylesheet and prefixes every action's link. No script, no inline style: the page works under the
 * strict policy {@link PAGE_CSP}.
 */
export function renderPage(page: Page, basePath: string): string {
  const paragraphs = (page.details ?? []).map((p) => `  <p>${escapeHtml(p)}</p>\n`).join('')
  const actions = (page.actions ?? [])
    .map(
      (a, i) =>
        `<a${i === 0 ? ' class="primary"' : ''} href="${escapeHtml('href' in a ? a.href : basePath + a.to)}">${escapeHtml(a.label)}</a>`,
    )
    .join('\n    ')
  const form =
    page.form === undefined
      ? ''
      : `<form method="post" action="${escapeHtml(basePath + page.form.action)}"${page.form.input === undefined ? '' : ' class="field"'}>${page.form.input === undefined ? '' : inputHtml(page.form.input)}<button type="submit" class="primary">${escapeHtml(page.form.label)}</button></form>${actions === '' ? '' : '\n    '}`
  const nav = form + actions
  return htmlDocument({
    title: `${page.title} · kasm-runtime-gateway`,
    head: [
      ...(page.continueTo === undefined
        ? []
        : [`<meta http-equiv="refresh" content="0; url=${escapeHtml(page.continueTo)}">`]),
      // Named, so a browser does not look for one at the origin's root, which is not the gateway's under a base path.
      `<link rel="icon" href="${escapeHtml(basePath)}favicon.ico" sizes="32x32">`,
      `<link rel="stylesheet" href="${escapeHtml(basePath)}pages/pages.css">`,
    ],
    body: `<header class="bar"><span class="brand">kasm-runtime-gateway</span></header>
<main>
  <h1>${escapeHtml(page.title)}</h1>
  <p class="lead">${escapeHtml(page.lead)}</p>
${paragraphs}${nav === '' ? '' : `  <nav class="actions" aria-label="What you can do">\n    ${nav}\n  </nav>\n`}${page.code === undefined ? '' : `  <p class="code">Error code: <code>${escapeHtml(page.code)}</code></p>\n`}</main>`,
  })
}

function inputHtml(input: PageInput): string {
  const id = `field-${escapeHtml(input.name)}`
  const error =
    input.error === undefined ? '' : `<p class="field-error" id="${id}-error">${escapeHtml(input.error)}</p>`
  const described = input.error === undefined ? '' : ` aria-invalid="true" aria-describedby="${id}-error"`
  return `<label for="${id}">${escapeHtml(input.label)}</label><input id="${id}" name="${escapeHtml(input.name)}" type="text" inputmode="${input.inputmode}" autocomplete="${escapeHtml(input.autocomplete)}" maxlength="${input.maxLength}" required autofocus${described}>${error}`
}

/**
 * The pages' Content-Security-Policy: nothing runs, styles come only from the gateway's stylesheet, forms
 * can only post to the gateway, and no other site may frame a page (clickjacking).
 */
export const PAGE_CSP =
  "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
