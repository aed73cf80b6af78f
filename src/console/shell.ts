import { escapeHtml, htmlDocument } from '../pages/document.ts'
import type { ConsoleManifest } from './assets.ts'
import { entityTag } from './assets.ts'

/** The page's HTML: the same for every console URL (the script routes by path), with its ETag. */
export interface Shell {
  readonly html: Buffer
  readonly etag: string
}

/** The name of the `<meta>` that tells the page the deployment's Kasm origin (the viewer's links). */
export const KASM_ORIGIN_META = 'krg-kasm-origin'

/** Which page a shell is: the console's (overview and sessions) or the team report's. */
export type ShellPage = 'console' | 'report'

/**
 * The console page: no inline script or style (the CSP forbids both), only the bundle's two hashed files
 * under `<base>assets/`. What shows before the script runs is a loading line, and a note for a browser
 * without JavaScript. `kasmOrigin` (where the Kasm viewer of a session is, when known) is a `<meta>`: data
 * for the script, not script.
 */
export function renderShell(
  basePath: string,
  manifest: ConsoleManifest,
  options: { readonly kasmOrigin?: string | null; readonly page?: ShellPage } = {},
): Shell {
  const report = options.page === 'report'
  const asset = (name: string) => escapeHtml(`${basePath}assets/${name}`)
  const kasm = options.kasmOrigin ?? null
  const html = Buffer.from(
    htmlDocument({
      title: report ? 'Report · kasm-runtime-gateway' : 'Sessions · kasm-runtime-gateway',
      head: [
        ...(kasm === null ? [] : [`<meta name="${KASM_ORIGIN_META}" content="${escapeHtml(kasm)}">`]),
        `<link rel="icon" href="${asset(manifest.icon)}" type="image/svg+xml">`,
        `<link rel="stylesheet" href="${asset(report ? manifest.reportStylesheet : manifest.stylesheet)}">`,
        `<script type="module" src="${asset(report ? manifest.reportScript : manifest.script)}"></script>`,
      ],
      body: `<div id="app"><main class="boot" aria-busy="true"><p role="status">Loading the console…</p></main></div>
<noscript><p class="boot">The console needs JavaScript. The session routes under /desktop/&lt;kasm_id&gt;/mcp/ work without it.</p></noscript>`,
    }),
  )
  return { html, etag: entityTag(html) }
}
