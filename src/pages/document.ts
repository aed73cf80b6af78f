const escapes: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => escapes[c] ?? c)
}

/** What {@link htmlDocument} puts around a page's content. */
export interface HtmlDocument {
  /** The `<title>`, as text (escaped here). */
  readonly title: string
  /** Further elements of `<head>` (links, a refresh), as markup whose values the caller escaped. */
  readonly head: readonly string[]
  /** The content of `<body>`, as markup whose values the caller escaped. */
  readonly body: string
}

/**
 * A complete HTML document as every page the gateway serves starts (its pages, the console's shell, the demo's
 * identity provider): UTF-8, the phone viewport, light and dark schemes, no Referer to anywhere.
 */
export function htmlDocument(doc: HtmlDocument): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(doc.title)}</title>
${doc.head.map((line) => `${line}\n`).join('')}</head>
<body>
${doc.body}
</body>
</html>
`
}
