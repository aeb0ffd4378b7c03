/**
 * Finds the issuer's `jwks_uri`: OpenID Connect Discovery first, then RFC 8414 metadata
 * (with the well-known segment inserted before the issuer's path, RFC 8414 §3.1). The
 * document's `issuer` must equal the configured one (RFC 8414 §3.3) so that a wrong URL
 * cannot silently make us trust another issuer's keys.
 */
export async function discoverJwksUri(issuer: string, timeoutMs = 5_000): Promise<string> {
  const url = new URL(issuer);
  const path = url.pathname.replace(/\/+$/, '');
  const candidates = [
    `${url.origin}${path}/.well-known/openid-configuration`,
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${url.origin}/.well-known/openid-configuration${path}`,
  ];
  const problems: string[] = [];
  for (const candidate of candidates) {
    try {
      const res = await fetch(candidate, { signal: AbortSignal.timeout(timeoutMs), redirect: 'error', headers: { accept: 'application/json' } });
      if (!res.ok) {
        problems.push(`${candidate}: HTTP ${res.status}`);
        continue;
      }
      const doc = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
      if (typeof doc.issuer === 'string' && doc.issuer.replace(/\/+$/, '') !== issuer) {
        problems.push(`${candidate}: issuer is ${doc.issuer}, expected ${issuer}`);
        continue;
      }
      if (typeof doc.jwks_uri !== 'string') {
        problems.push(`${candidate}: no jwks_uri`);
        continue;
      }
      return doc.jwks_uri;
    } catch (err) {
      problems.push(`${candidate}: ${(err as Error).message}`);
    }
  }
  throw new Error(`cannot discover jwks_uri of ${issuer} (${problems.join('; ')})`);
}
