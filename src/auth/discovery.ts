/**
 * The issuer's metadata: OpenID Connect Discovery first, then RFC 8414 (with the well-known
 * segment inserted before the issuer's path, RFC 8414 §3.1). The document's `issuer` must
 * equal the configured one (RFC 8414 §3.3) so that a wrong URL cannot silently make us trust
 * another issuer's keys. Used for the resource server's `jwks_uri` and for browser sign-in.
 */
export type IssuerMetadata = Record<string, unknown> & { issuer: string };

export async function discoverIssuerMetadata(issuer: string, timeoutMs = 5_000, required: readonly string[] = ['jwks_uri']): Promise<IssuerMetadata> {
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
      const doc = (await res.json().catch(() => undefined)) as Record<string, unknown> | undefined;
      if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
        problems.push(`${candidate}: not a JSON object`);
        continue;
      }
      if (typeof doc.issuer !== 'string' || doc.issuer.replace(/\/+$/, '') !== issuer) {
        problems.push(`${candidate}: issuer is ${String(doc.issuer)}, expected ${issuer}`);
        continue;
      }
      const missing = required.filter((k) => !(typeof doc[k] === 'string' && /^https?:\/\//.test(doc[k] as string) && URL.canParse(doc[k] as string)));
      if (missing.length) {
        problems.push(`${candidate}: ${missing.join(', ')} missing`);
        continue;
      }
      return doc as IssuerMetadata;
    } catch (err) {
      problems.push(`${candidate}: ${(err as Error).message}`);
    }
  }
  throw new Error(`cannot discover the metadata of ${issuer} (${problems.join('; ')})`);
}

/** The issuer's `jwks_uri` (token verification). */
export async function discoverJwksUri(issuer: string, timeoutMs = 5_000): Promise<string> {
  return (await discoverIssuerMetadata(issuer, timeoutMs)).jwks_uri as string;
}
