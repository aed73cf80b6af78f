/**
 * Human pages: what a person sees instead of a JSON body. Use `app.pages.send(reply, page)` with a page from
 * the catalogue (or your own {@link Page}); `app.pages.sendError` picks a page or JSON for an error.
 */
export {
  idpUnavailable,
  noRole,
  pageForError,
  signedIn,
  signedOut,
  signInFailed,
  signInLink,
  signInNotConfigured,
  signInRequired,
} from './catalogue.ts'
export { escapeHtml, type HtmlDocument, htmlDocument } from './document.ts'
export { isBrowserNavigation } from './navigation.ts'
export { PAGE_CSP, type Page, type PageAction, renderPage } from './page.ts'
export { type Pages, pagesPlugin } from './plugin.ts'
