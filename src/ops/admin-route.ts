/**
 * The admin routes of the metrics listener (issue 31 §2; docs/pinning.md), served only when
 * `admin.token` is set, and only there: the metrics port stays inside the cluster, never
 * behind the Ingress. `POST /admin/pins/approve` with `{"backend": "...", "tool"?: "..."}`
 * approves a backend's pending tool-definition changes, as `switchboard pins approve` does —
 * and refuses, as it does, a backend whose pins are its lockfile (409, issue 41 §7): the file is
 * the pins, and approving would write pins into the store that nothing reads.
 *
 * `Authorization: Bearer <admin.token>` is compared in constant time (digests of both, so
 * neither the length nor a prefix of the token shows in the timing); 401 without it.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';

export const ADMIN_APPROVE_PATH = '/admin/pins/approve';
const MAX_BODY = 4096;

/** Why a backend's changes cannot be approved here (409), e.g. its pins are a lockfile. */
export interface ApprovalRefused {
  refused: string;
}

export interface AdminRoutes {
  token: string;
  /** The tools approved; why approving is refused; undefined when there is no pinned backend of that name. */
  approve(backend: string, tool?: string): Promise<string[] | ApprovalRefused | undefined>;
}

export type Send = (res: http.ServerResponse, status: number, type: string, body: string, headers?: http.OutgoingHttpHeaders) => void;

const digest = (s: string) => createHash('sha256').update(s).digest();

export function adminAuthorized(token: string, authorization: string | undefined): boolean {
  const m = /^Bearer (.+)$/i.exec(authorization ?? '');
  return !!m && timingSafeEqual(digest(m[1]!), digest(token));
}

/** Answers an admin request (the path is {@link ADMIN_APPROVE_PATH}). */
export function handleAdmin(admin: AdminRoutes, req: http.IncomingMessage, res: http.ServerResponse, send: Send): void {
  const json = (status: number, value: unknown, headers?: http.OutgoingHttpHeaders) => send(res, status, 'application/json', JSON.stringify(value), headers);
  if (req.method !== 'POST') return json(405, { error: 'method_not_allowed' }, { allow: 'POST' });
  if (!adminAuthorized(admin.token, req.headers.authorization)) return json(401, { error: 'unauthorized' }, { 'www-authenticate': 'Bearer realm="switchboard-admin"' });
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size <= MAX_BODY) chunks.push(c);
  });
  req.on('end', () => {
    let body: { backend?: unknown; tool?: unknown };
    try {
      body = size > MAX_BODY ? {} : (JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body);
    } catch {
      body = {};
    }
    if (typeof body?.backend !== 'string' || (body.tool !== undefined && typeof body.tool !== 'string')) {
      return json(400, { error: 'invalid_request', error_description: 'the body is {"backend": "<name>", "tool"?: "<name>"}' });
    }
    admin.approve(body.backend, body.tool as string | undefined).then(
      (approved) => {
        if (!approved) return json(404, { error: 'not_found', error_description: `no pinned backend "${body.backend}"` });
        if ('refused' in approved) return json(409, { error: 'conflict', error_description: approved.refused });
        json(200, { backend: body.backend, approved });
      },
      () => json(500, { error: 'internal' }),
    );
  });
}
