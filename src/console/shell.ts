import { createHash } from 'node:crypto'
import type { ConsoleManifest } from './assets.ts'

/** The page's HTML: the same for every console URL (the script routes by path), with its ETag. */
export interface Shell {
  readonly html: Buffer
  readonly etag: string
}

function escapeAttribute(value: string): string {
  return value.replace(/[&"<>]/g, (c) => `&#${c.charCodeAt(0)};`)
}

/**
 * The console page: no inline script or style (the CSP forbids both), only the bundle's two hashed files
 * under `<base>assets/`. What shows before the script runs is a loading line, and a note for a browser
 * without JavaScript.
 */
export function renderShell(basePath: string, manifest: ConsoleManifest): Shell {
  const asset = (name: string) => escapeAttribute(`${basePath}assets/${name}`)
  const html = Buffer.from(
    `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="referrer" content="no-referrer">
<title>Sessions · kasm-runtime-gateway</title>
<link rel="icon" href="${asset(manifest.icon)}" type="image/svg+xml">
<link rel="stylesheet" href="${asset(manifest.stylesheet)}">
<script type="module" src="${asset(manifest.script)}"></script>
</head>
<body>
<div id="app"><main class="boot" aria-busy="true"><p role="status">Loading the console…</p></main></div>
<noscript><p class="boot">The console needs JavaScript. The session routes under /desktop/&lt;kasm_id&gt;/mcp/ work without it.</p></noscript>
</body>
</html>
`,
  )
  return { html, etag: `"${createHash('sha256').update(html).digest('base64url').slice(0, 22)}"` }
}
