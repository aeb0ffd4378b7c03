/**
 * The environment a stdio backend's child starts with: a short allow-list of the gateway's own
 * variables that programs need to run at all (where home is, where commands are, who runs
 * them, the terminal), then the backend's configured `env` on top. Never the whole of the
 * gateway's environment: it holds the gateway's secrets (signing keys, client secrets, Redis
 * passwords), and a backend is someone else's program (SPEC §1, backend side).
 *
 * The list is the one sudo keeps by default on POSIX systems; Windows needs its profile and
 * system folders to start most programs. A value starting with `()` is a shell function
 * exported by bash, never passed on (the Shellshock family of bugs).
 */

const POSIX_ALLOWED = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER'] as const;
const WINDOWS_ALLOWED = ['APPDATA', 'HOMEDRIVE', 'HOMEPATH', 'LOCALAPPDATA', 'PATH', 'PROCESSOR_ARCHITECTURE', 'PROGRAMFILES', 'SYSTEMDRIVE', 'SYSTEMROOT', 'TEMP', 'USERNAME', 'USERPROFILE'] as const;

/** The allow-listed variables of `from` (the gateway's environment), with `configured` on top. */
export function childEnvironment(configured: Readonly<Record<string, string>> | undefined, from: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of platform === 'win32' ? WINDOWS_ALLOWED : POSIX_ALLOWED) {
    const value = from[name];
    if (value !== undefined && !value.startsWith('()')) env[name] = value;
  }
  return { ...env, ...configured };
}
