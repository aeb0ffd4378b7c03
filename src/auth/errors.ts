/**
 * OAuth resource-server errors (RFC 6750 §3), kept apart from JSON-RPC errors: they become
 * an HTTP status and a `WWW-Authenticate` header, never a JSON-RPC body.
 */
export type AuthErrorCode = 'missing_token' | 'invalid_token' | 'insufficient_scope' | 'temporarily_unavailable';

export class AuthError extends Error {
  constructor(
    readonly code: AuthErrorCode,
    message: string,
    /** Scopes the caller would need (for `scope=` in the challenge). */
    readonly requiredScopes: readonly string[] = [],
  ) {
    super(message);
    this.name = 'AuthError';
  }

  /**
   * 503 when the issuer's keys cannot be fetched: the token may be fine, and a 401 would
   * send the client into a pointless re-authorization.
   */
  get status(): 401 | 403 | 503 {
    if (this.code === 'temporarily_unavailable') return 503;
    return this.code === 'insufficient_scope' ? 403 : 401;
  }
}

/**
 * Builds the challenge. A request without a token gets no `error` attribute (RFC 6750
 * §3.1); `resource_metadata` points clients at RFC 9728 metadata (MCP authorization spec).
 */
export function wwwAuthenticate(err: AuthError, resourceMetadataUrl: string): string {
  const parts = [`resource_metadata="${resourceMetadataUrl}"`];
  if (err.requiredScopes.length) parts.push(`scope="${err.requiredScopes.join(' ')}"`);
  if (err.code !== 'missing_token') {
    parts.push(`error="${err.code}"`, `error_description="${err.message.replace(/["\\]/g, '')}"`);
  }
  return `Bearer ${parts.join(', ')}`;
}
