/**
 * Docs people can find (issue 32 §4): no broken relative link or `#anchor` in README.md,
 * docs/**\/*.md and the folder READMEs (scripts/check-links.ts); the README stays short
 * (≤ 15,000 bytes: the way in, the rest is in docs/); and every page of docs/ says at its top
 * which of its parts are generated, and from what.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { anchorsOf, brokenLinks, documentedFiles, slug } from '../../scripts/check-links.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

describe('every relative link and anchor in the docs resolves', () => {
  const files = documentedFiles();
  test('the check covers the README, docs/ and the folder READMEs', () => {
    for (const f of ['README.md', 'docs/architecture.md', 'docs/configuration-reference.md', 'src/mcp/README.md', 'bench/README.md']) assert.ok(files.includes(f), f);
  });
  for (const file of files) {
    test(file, () => assert.deepEqual(brokenLinks(file), []));
  }
});

describe('the link check itself', () => {
  test('slugs follow GitHub: lower case, punctuation dropped, spaces to dashes', () => {
    assert.equal(slug('Two protocol revisions on one endpoint: 2025-11-25 and 2026-07-28'), 'two-protocol-revisions-on-one-endpoint-2025-11-25-and-2026-07-28');
    assert.equal(slug('Locking `/metrics` down'), 'locking-metrics-down');
    assert.equal(slug("The gateway as a client of a backend's authorization server"), 'the-gateway-as-a-client-of-a-backends-authorization-server');
    assert.equal(slug('Record schema `switchboard.audit/v1`'), 'record-schema-switchboardauditv1');
    assert.equal(slug('NetworkPolicy: `networkPolicy`'), 'networkpolicy-networkpolicy');
  });

  test('repeated headings get -1, -2; <a id> counts; headings in code blocks do not', () => {
    const anchors = anchorsOf('# A\n\n## Notes\n\n## Notes\n\n## Notes\n\n<a id="here"></a>text\n\n```sh\n# not-a-heading\n```\n');
    assert.deepEqual([...anchors].sort(), ['a', 'here', 'notes', 'notes-1', 'notes-2']);
  });

  test('a missing file, a missing anchor and a missing same-page anchor are reported; code blocks and URLs are not', () => {
    const root = mkdtempSync(join(tmpdir(), 'sb-links-'));
    mkdirSync(join(root, 'docs'));
    writeFileSync(join(root, 'docs', 'b.md'), '# B page\n\n## Real section\n');
    writeFileSync(
      join(root, 'docs', 'a.md'),
      '# A\n\n[ok](b.md#real-section) [ok](#a) [ok](https://example.com/x#y)\n[gone](c.md) [bad](b.md#unreal) [self](#nowhere)\n\n```md\n[example](nothing.md)\n```\n',
    );
    const problems = brokenLinks('docs/a.md', root);
    assert.equal(problems.length, 3, problems.join('\n'));
    assert.match(problems[0]!, /c\.md \(no file docs\/c\.md\)/);
    assert.match(problems[1]!, /b\.md#unreal \(no heading or <a id> "unreal"/);
    assert.match(problems[2]!, /#nowhere/);
  });
});

describe('README and docs/ pages', () => {
  test('README.md is at most 15,000 bytes', () => {
    const size = statSync(join(ROOT, 'README.md')).size;
    assert.ok(size <= 15_000, `README.md is ${size} bytes: move detail into a page of docs/ and link it`);
  });

  test('every page of docs/ says near its top what of it is generated', () => {
    const pages = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md'));
    const silent = pages.filter((p) => !/generated/i.test(readFileSync(join(ROOT, 'docs', p), 'utf8').split('\n').slice(0, 12).join('\n')));
    assert.deepEqual(silent, [], 'add a line such as "**Generated:** nothing on this page is generated." under the title');
  });
});
