/**
 * A real browser for tests of the browser flows (SPEC §4): Debian's Chromium at
 * /usr/bin/chromium driven by playwright-core (no downloaded browser builds).
 *
 * Why a real browser: cookies (HttpOnly, SameSite, Path), redirects, form posts and the
 * Content-Security-Policy of the pages are enforced by the browser; a test with fetch()
 * would only prove what we think browsers do.
 *
 * Every context is separate (own cookie jar) — `newPage()` is "another browser". Everything
 * is closed by `close()`, within a deadline; Playwright also kills the browser when the test
 * process exits. Under `npm test` the files share one browser process (launchBrowser).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
/**
 * What Playwright starts: {@link CHROMIUM} through test/fixtures/chromium.sh, which merges the
 * `--disable-features` lists (Playwright's and {@link CHROMIUM_ARGS}'), since Chromium reads
 * only the last one given.
 */
export const CHROMIUM_LAUNCHER = fileURLToPath(new URL('../fixtures/chromium.sh', import.meta.url));
/**
 * Headless, quiet, no network of its own: every test browser is launched with these.
 *
 * The last two spare CPU that no test's claim depends on (issue 43; measured on this 2-core
 * machine, a context opened, one page loaded, a form posted, the context closed: 1.7–1.9 s of
 * CPU before, 0.84 s after, half the browser's share of a whole `npm test`):
 * - every window of Chromium 156 loads two WebUI omnibox popups (`chrome://omnibox-popup.top-chrome`,
 *   each a renderer process), which a headless page never shows;
 * - site isolation gives every site a process of its own. The pages under test are served from
 *   127.0.0.1, one site, and what the tests read — cookies, redirects, form posts, the
 *   Content-Security-Policy, SameSite — is the web platform's, the same in one process or many.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup,IsolateOrigins,site-per-process',
  '--disable-site-isolation-trials',
];

/** How every Chromium of the suite is started: the launcher script (Debian's binary behind it) and {@link CHROMIUM_ARGS}. */
export function chromiumLaunchOptions(timeout: number): { executablePath: string; timeout: number; args: string[] } {
  return { executablePath: CHROMIUM_LAUNCHER, timeout, args: [...CHROMIUM_ARGS] };
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const LAUNCH_TIMEOUT_MS = 30_000;
const ACTION_TIMEOUT_MS = 15_000;
const CLOSE_TIMEOUT_MS = 10_000;

export interface BrowserHandle {
  browser: Browser;
  /** A page in a fresh context: its own cookies, i.e. a separate browser profile. */
  newPage(): Promise<Page>;
  /** A fresh context for tests that want several pages sharing cookies. */
  newContext(): Promise<BrowserContext>;
  /** Closes every context and the browser. Idempotent. */
  close(): Promise<void>;
}

/** Installs Chromium through scripts/test-prerequisites.sh when it is missing. */
export function ensureChromium(): void {
  if (existsSync(CHROMIUM)) return;
  const run = spawnSync('bash', ['scripts/test-prerequisites.sh'], { cwd: ROOT, stdio: 'inherit', timeout: 10 * 60_000 });
  if (!existsSync(CHROMIUM)) {
    throw new Error(`browser tests need ${CHROMIUM} (Debian package chromium); scripts/test-prerequisites.sh exited with ${run.status ?? run.signal}`);
  }
}

/**
 * The run's shared Chromium (scripts/run-tests.sh starts test/fixtures/browser-server-process.ts
 * and names it in `SB_TEST_BROWSER_WS`; issue 43), else one launched for this file. Each page
 * has a context of its own either way; `close()` on a shared browser closes this file's
 * contexts and disconnects, leaving the browser to the other files.
 */
export async function launchBrowser(): Promise<BrowserHandle> {
  const shared = process.env.SB_TEST_BROWSER_WS;
  let browser: Browser;
  if (shared) {
    browser = await chromium.connect(shared, { timeout: LAUNCH_TIMEOUT_MS });
  } else {
    ensureChromium();
    browser = await chromium.launch(chromiumLaunchOptions(LAUNCH_TIMEOUT_MS));
  }
  const contexts = new Set<BrowserContext>();
  let closing: Promise<void> | undefined;

  async function newContext(): Promise<BrowserContext> {
    const context = await browser.newContext();
    context.setDefaultTimeout(ACTION_TIMEOUT_MS);
    context.setDefaultNavigationTimeout(ACTION_TIMEOUT_MS);
    contexts.add(context);
    context.on('close', () => contexts.delete(context));
    return context;
  }

  return {
    browser,
    newContext,
    async newPage() {
      return (await newContext()).newPage();
    },
    close() {
      closing ??= (async () => {
        const all = (async () => {
          await Promise.allSettled([...contexts].map((c) => c.close()));
          await browser.close();
        })();
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, CLOSE_TIMEOUT_MS);
          timer.unref();
        });
        await Promise.race([all.catch(() => undefined), deadline]);
        clearTimeout(timer);
      })();
      return closing;
    },
  };
}

/**
 * Collects what a page reports as wrong: console errors and warnings (CSP violations are
 * reported there) and uncaught page errors. Chrome also logs "Failed to load resource" for a
 * document served with an error status (a 403 refusal page is meant to be one): that one
 * message about the page's own URL is not a problem. Read `problems` after the page settled.
 */
export function watchPage(page: Page): { problems: string[] } {
  const problems: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() !== 'error' && msg.type() !== 'warning') return;
    const ownStatus = /^Failed to load resource: the server responded with a status of \d+/.test(msg.text()) && msg.location().url === page.url();
    if (!ownStatus) problems.push(`console ${msg.type()}: ${msg.text()} (${msg.location().url})`);
  });
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  return { problems };
}

/**
 * A user confirming on a backend's URL-mode elicitation page (test/fixtures/url-confirmations.ts):
 * the page opened in a fresh profile, its button pressed, the confirmation shown.
 */
export async function confirmOnPage(handle: BrowserHandle, url: string): Promise<void> {
  const page = await handle.newPage();
  try {
    await page.goto(url);
    await page.click('#confirm');
    await page.waitForSelector('#done');
  } finally {
    await page.context().close();
  }
}
