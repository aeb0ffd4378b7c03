/**
 * A module preloaded (`--import`) into a child Node process whose code calls
 * `server.listen(port)` without a host, as server-everything does: it binds such calls to
 * 127.0.0.1 instead of every interface, so the development demo backend is never exposed.
 * Calls that name a host, a path or an options object are untouched.
 */
const SOURCE = `
import net from 'node:net';
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  const isPort = typeof port === 'number' || (typeof port === 'string' && /^[0-9]+$/.test(port));
  if (isPort && typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1');
  return listen.apply(this, args);
};
`;

export const LOOPBACK_PRELOAD_URL = `data:text/javascript;base64,${Buffer.from(SOURCE).toString('base64')}`;
