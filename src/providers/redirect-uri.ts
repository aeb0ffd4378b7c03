/**
 * The gateway's OAuth redirect URIs at third-party providers (SPEC §4 step 4; RFC 9700
 * §4.4.2 mix-up defence, issue 12): one per provider, `<publicUrl>/oauth/callback/{provider}`,
 * so an answer bounced through another provider's authorization server arrives at the wrong
 * path. Here, in providers/, because both the authorization request (connect/) and dynamic
 * client registration (provider-endpoints.ts) must send exactly the same URI.
 */

/** The redirect URI for `provider`: what operators register and what every request sends. */
export function callbackUri(publicUrl: string, provider: string): string {
  return `${publicUrl}/oauth/callback/${provider}`;
}

/** The redirect URI registrations made before per-provider URIs point at. */
export function legacyCallbackUri(publicUrl: string): string {
  return `${publicUrl}/oauth/callback`;
}
