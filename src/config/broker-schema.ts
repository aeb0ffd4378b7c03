/**
 * The `auth.broker` config block (SPEC §8 "Broker mode"; issue 19): with `auth.mode: broker`
 * the gateway is the OAuth authorization server its MCP clients see (src/broker/), and this
 * block says how it signs, whom it lets register, and how long what it issues lives.
 *
 * `signingKeys` are PEM private keys (usually `${VAR}`): the first signs, all verify, so a
 * key is rotated by putting the new one first and dropping the old one after
 * `accessTokenTtl`. Each key is checked here, once, so a bad key stops the start with an
 * error naming `auth.broker.signingKeys.<n>` and never a part of the key.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { z } from 'zod';

export type SigningAlgorithm = 'RS256' | 'ES256' | 'ES384' | 'ES512' | 'EdDSA';

/** The JWS algorithm a private key signs with, or undefined when the key is not one the broker uses. */
export function signingAlgorithmOf(key: KeyObject): SigningAlgorithm | undefined {
  const details = key.asymmetricKeyDetails ?? {};
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return (details.modulusLength ?? 0) >= 2048 ? 'RS256' : undefined;
    case 'ec':
      return ({ prime256v1: 'ES256', secp384r1: 'ES384', secp521r1: 'ES512' } as const)[details.namedCurve as string];
    case 'ed25519':
      return 'EdDSA';
    default:
      return undefined;
  }
}

const KEY_KINDS = 'a PEM private key: RSA of 2048 bits or more, EC P-256, P-384 or P-521, or Ed25519';

const signingKey = z.string().superRefine((pem, ctx) => {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    // The parser's message may quote the input: say only what was expected.
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: `is not ${KEY_KINDS}` });
    return;
  }
  if (!signingAlgorithmOf(key)) ctx.addIssue({ code: z.ZodIssueCode.custom, message: `must be ${KEY_KINDS}` });
});

/** Built with the config's own duration type (schema.ts), which this file cannot import without a cycle. */
export function brokerSchema(duration: (fallback: string) => z.ZodType<number, z.ZodTypeDef, string | number | undefined>) {
  return z
    .object({
      /** Without them one key is generated per process: a single replica only (as with `secrets`). */
      signingKeys: z.array(signingKey).min(1, 'must list at least one key, or be left out').optional(),
      /** RFC 7591 dynamic client registration at `/oauth2/register`. */
      registration: z.boolean().default(true),
      /** Client ID Metadata Documents: a client_id that is an https URL of the client's metadata. */
      clientIdMetadataDocuments: z.boolean().default(true),
      /** Lifetime of the gateway's JWT access tokens; also how long a revoked grant's tokens keep working. */
      accessTokenTtl: duration('10m').refine((ms) => ms >= 1_000 && ms <= 86_400_000, 'must be between 1s and 24h'),
      /** How long a grant (the user's consent) and its rotating refresh tokens last; refreshing does not extend it. */
      refreshTokenTtl: duration('30d').refine((ms) => ms >= 60_000, 'must be at least 1m'),
      /** Bounds on anonymous RFC 7591 registration (issue 28 §4; src/broker/registration-gate.ts). */
      registrationLimits: registrationLimitsSchema(duration).default({}),
    })
    .strict()
    .superRefine((b, ctx) => {
      if (b.refreshTokenTtl <= b.accessTokenTtl) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, path: ['refreshTokenTtl'], message: 'must be longer than accessTokenTtl' });
      }
    });
}

/**
 * `auth.broker.registrationLimits`: registration is anonymous, so each bound is on what a
 * stranger can make the gateway keep. `perAddress` registrations per `window` from one client
 * address (`listen.trustProxy` says where that address comes from); a registration that has
 * obtained no token after `unusedClientTtl` is forgotten; `total` registrations per
 * `unusedClientTtl` from all addresses together, so at most about twice that many unused
 * registrations are kept at any time. An IPv6 client is counted by its network of `ipv6Prefix`
 * bits (a /64 by default: a client that holds one rotates through it for free), an IPv4-mapped
 * IPv6 address as the IPv4 address.
 */
function registrationLimitsSchema(duration: (fallback: string) => z.ZodType<number, z.ZodTypeDef, string | number | undefined>) {
  return z
    .object({
      perAddress: z.number().int().min(1).default(30),
      window: duration('10m').refine((ms) => ms >= 1_000 && ms <= 86_400_000, 'must be between 1s and 24h'),
      total: z.number().int().min(1).default(10_000),
      unusedClientTtl: duration('6h').refine((ms) => ms >= 10_000 && ms <= 7 * 86_400_000, 'must be between 10s and 7d'),
      /** An IPv6 client counts as its network of this many bits (src/broker/registration-address.ts). */
      ipv6Prefix: z.number().int().min(1).max(128).default(64),
    })
    .strict();
}

/** What the cross-key rules of broker mode read. */
interface BrokerModeConfig {
  redis?: unknown;
  auth: { mode: string; audience: string; login?: unknown; broker: { signingKeys?: string[] } };
  backends: ReadonlyArray<{ tokenExchange?: unknown }>;
}

/** Rules that span keys (for the config's superRefine): each names the key to fix. */
export function brokerModeIssues(c: BrokerModeConfig): Array<{ path: Array<string | number>; message: string }> {
  if (c.auth.mode !== 'broker') return [];
  const issues: Array<{ path: Array<string | number>; message: string }> = [];
  // Users sign in at the upstream identity provider through the gateway's own client there.
  if (!c.auth.login) issues.push({ path: ['auth', 'login'], message: 'is required with auth.mode broker (the gateway\'s client at auth.issuer, where users sign in)' });
  // RFC 8707 §2: a resource indicator is an absolute URI, and auth.audience is the default one.
  if (!URL.canParse(c.auth.audience)) issues.push({ path: ['auth', 'audience'], message: 'must be an absolute URI with auth.mode broker (it is the default RFC 8707 resource), e.g. <publicUrl>/mcp' });
  if (c.redis && !c.auth.broker.signingKeys) {
    issues.push({ path: ['auth', 'broker', 'signingKeys'], message: 'is required with redis and auth.mode broker (replicas must sign and verify with the same keys)' });
  }
  c.backends.forEach((b, i) => {
    if (b.tokenExchange) {
      issues.push({ path: ['backends', i, 'tokenExchange'], message: 'needs auth.mode resource-server: in broker mode the caller holds a token of the gateway, which auth.issuer cannot exchange' });
    }
  });
  return issues;
}
