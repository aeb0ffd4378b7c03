/**
 * The frame every browser page of Switchboard shares (SPEC §4: sign-in, connect, connections):
 * one small HTML document, one inline stylesheet allowed by its CSP hash, no scripts, no
 * third-party assets, and the security headers that keep the pages from being framed,
 * cached, sniffed or leaking their URL (which can carry `code` and `state`) as a referrer.
 *
 * Escaping is structural: page bodies are written with the `html` tag, which escapes every
 * interpolated value unless it is itself `html` output. Nothing user- or provider-supplied
 * can become markup by forgetting a call.
 */
import { createHash } from 'node:crypto';

/** Markup that is already safe to emit (produced by {@link html}). */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for element content and double- or single-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

type Interpolation = SafeHtml | string | number | null | undefined | false | readonly Interpolation[];

function render(value: Interpolation): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map((v) => render(v)).join('');
  return escapeHtml(String(value));
}

/** Template tag: literal parts are markup, every interpolation is escaped (arrays are joined). */
export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += render(value) + strings[i + 1]!;
  });
  return new SafeHtml(out);
}

/**
 * The only stylesheet. Colours meet WCAG AA (body text 16:1, links and the primary button
 * ≥ 7:1, muted text ≥ 7:1); focus is a 3 px dark outline; every control is ≥ 44 px high;
 * long unbroken strings (ids, hostile names) wrap instead of widening the page.
 */
export const STYLE = `
:root{color-scheme:light;--fg:#1a1a1a;--muted:#4a4a4a;--bg:#fff;--panel:#f4f5f7;--line:#c7cbd1;--accent:#0a3d91;--danger:#8f1d1d}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%;text-size-adjust:100%}
body{margin:0;background:var(--bg);color:var(--fg);font:1rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;overflow-wrap:anywhere}
main{max-width:36rem;margin:0 auto;padding:2rem 1rem 3rem}
h1{font-size:1.5rem;line-height:1.25;margin:0 0 1rem}
h2{font-size:1.125rem;margin:1.5rem 0 .5rem}
p,ul,dl{margin:0 0 1rem}
.muted{color:var(--muted)}
.panel{background:var(--panel);border:1px solid var(--line);border-radius:.5rem;padding:1rem;margin:0 0 1rem}
.panel>:last-child{margin-bottom:0}
dt{font-weight:600}
dd{margin:0 0 .5rem}
pre{white-space:pre-wrap;margin:0 0 1rem}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9375em}
ul.scopes{padding-left:1.25rem}
ul.list{list-style:none;padding:0}
ul.list>li{display:flex;flex-wrap:wrap;align-items:center;justify-content:space-between;gap:.5rem;border-bottom:1px solid var(--line);padding:.75rem 0}
.actions{display:flex;flex-wrap:wrap;gap:.75rem;margin:1.5rem 0 0}
form{margin:0}
button,.button{display:inline-flex;align-items:center;justify-content:center;min-height:2.75rem;padding:.5rem 1.25rem;border-radius:.375rem;border:2px solid var(--accent);font:inherit;font-weight:600;text-decoration:none;cursor:pointer;max-width:100%}
button.primary,.button.primary{background:var(--accent);color:#fff}
button.secondary,.button.secondary{background:var(--bg);color:var(--accent)}
button.danger{background:var(--bg);color:var(--danger);border-color:var(--danger)}
a{color:var(--accent)}
a:focus-visible,button:focus-visible{outline:3px solid var(--fg);outline-offset:2px}
.status{font-weight:600}
.status-connected{color:#135c25}
.status-expired{color:var(--danger)}
table{border-collapse:separate;border-spacing:0;width:100%}
th,td{text-align:left;vertical-align:top;padding:.25rem .75rem .25rem 0;overflow-wrap:break-word}
.sr-only{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);white-space:nowrap;border:0}
@media (max-width:30rem){.actions>*{flex:1 1 100%}.actions button,.actions .button{width:100%}}
`;

/** The CSP source for {@link STYLE}: `'sha256-<base64 of its SHA-256>'`. */
export const STYLE_HASH = `'sha256-${createHash('sha256').update(STYLE, 'utf8').digest('base64')}'`;

/**
 * Content-Security-Policy of every page. Nothing may load or run; the one inline stylesheet is
 * allowed by hash; forms may post to this origin only, plus `formActions` — origins a form
 * submission is then redirected to (browsers apply `form-action` to redirects after a form
 * submission, so a consent form answered by a 303 to a provider must list that provider).
 */
export function contentSecurityPolicy(formActions: readonly string[] = []): string {
  const sources = ["'self'", ...formActions.map(cspOrigin).filter((o): o is string => o !== undefined)];
  return [
    "default-src 'none'",
    `style-src ${STYLE_HASH}`,
    // Only the empty favicon of the layout: no request for /favicon.ico, nothing to report.
    'img-src data:',
    `form-action ${[...new Set(sources)].join(' ')}`,
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

/** An http(s) origin usable as a CSP source, or undefined (anything else is dropped). */
function cspOrigin(url: string): string | undefined {
  if (!URL.canParse(url)) return undefined;
  const u = new URL(url);
  return u.protocol === 'https:' || u.protocol === 'http:' ? u.origin : undefined;
}

/**
 * Headers on every page response (and on the redirects of the browser flows).
 * `same-origin`, not `no-referrer`: with no-referrer Chromium sends `Origin: null` on the
 * pages' own form POSTs, which the Origin check must refuse; same-origin still sends nothing
 * to the provider or any other site, so the connect URL never leaks in a Referer.
 */
export function securityHeaders(formActions: readonly string[] = []): Record<string, string> {
  return {
    'content-security-policy': contentSecurityPolicy(formActions),
    'x-frame-options': 'DENY',
    'referrer-policy': 'same-origin',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  };
}

/** A complete document: `<title>` is "<title> · Switchboard", `<h1>` is the title too. */
export function layout(o: { title: string; body: SafeHtml }): string {
  return `<!doctype html>${html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<meta name="robots" content="noindex">
<link rel="icon" href="data:,">
<title>${o.title} · Switchboard</title>
<style>${new SafeHtml(STYLE)}</style>
</head>
<body>
<main>
<h1>${o.title}</h1>
${o.body}
</main>
</body>
</html>
`}`;
}
