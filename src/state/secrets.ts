/**
 * The two keys of SPEC §3 `secrets`, turned into what the browser flows need — once, at
 * start, never per request:
 *
 * - `tokenKey` → an AES-256-GCM cipher for third-party tokens at rest (SPEC §4: "tokens
 *   encrypted at rest"). Each value gets a fresh 96-bit IV; the associated data binds a
 *   ciphertext to its purpose and owner (e.g. `vault:<user>:<provider>`), so a value copied
 *   to another user's key does not decrypt. Only full 16-byte tags are accepted.
 * - `cookieKey` → an HMAC-SHA256 signer for cookie values.
 *
 * Both are derived with HKDF so that one configured secret never serves two algorithms.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

const VERSION = 'v1';
/**
 * The full 128-bit GCM tag, enforced on open: without `authTagLength`, Node accepts any tag
 * length from 4 bytes up and compares only that prefix, so a forger needs 2^32 tries, not
 * 2^128 (NIST SP 800-38D §5.2.1.2, Appendix C; Node DEP0182).
 */
const TAG_BYTES = 16;

export interface TokenCipher {
  /** Seals `plain`; `context` must be given again to open it. */
  seal(plain: string, context: string): string;
  /** The plaintext, or undefined when the value was tampered with or sealed for another context. */
  open(sealed: string, context: string): string | undefined;
}

export interface Signer {
  sign(value: string): string;
  /** The value when the signature is right, else undefined. */
  verify(signed: string): string | undefined;
}

function derive(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), Buffer.alloc(0), `switchboard ${purpose}`, 32));
}

/**
 * `purpose` separates the keys of different uses of one secret (HKDF info): the vault and the
 * exchange cache share the default; the stateless era's `requestState` (stateless/request-state.ts)
 * gets its own, so that no sealed value of one use ever opens as another.
 */
export function createTokenCipher(tokenKey: string, purpose = 'token vault aes-256-gcm'): TokenCipher {
  const key = derive(tokenKey, purpose);
  return {
    seal(plain, context) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(Buffer.from(context, 'utf8'));
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join('.');
    },
    open(sealed, context) {
      const [version, iv, tag, body] = sealed.split('.');
      if (version !== VERSION || !iv || !tag || body === undefined) return undefined;
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES });
        decipher.setAAD(Buffer.from(context, 'utf8'));
        decipher.setAuthTag(Buffer.from(tag, 'base64url'));
        return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
      } catch {
        return undefined;
      }
    },
  };
}

export function createSigner(cookieKey: string): Signer {
  const key = derive(cookieKey, 'cookie hmac-sha256');
  const mac = (value: string) => createHmac('sha256', key).update(value).digest('base64url');
  return {
    sign: (value) => `${value}.${mac(value)}`,
    verify(signed) {
      const dot = signed.lastIndexOf('.');
      if (dot <= 0) return undefined;
      const value = signed.slice(0, dot);
      const given = Buffer.from(signed.slice(dot + 1));
      const expected = Buffer.from(mac(value));
      return given.length === expected.length && timingSafeEqual(given, expected) ? value : undefined;
    },
  };
}
