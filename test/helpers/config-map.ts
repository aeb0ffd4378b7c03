/**
 * A config file laid out as Kubernetes mounts a ConfigMap volume, and updated the way the
 * kubelet's atomic writer does it: the data goes into a new timestamped directory, a
 * `..data_tmp` symlink to it is renamed over `..data` in one step, and the old directory is
 * removed. The file the gateway is given, `<dir>/switchboard.yaml`, is a symlink to
 * `..data/switchboard.yaml` that never changes itself.
 */
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CONFIG_MAP_KEY = 'switchboard.yaml';

export class MountedConfigMap {
  #version = 0;
  #current: string | undefined;

  private constructor(readonly dir: string) {}

  /** A new mount with `text` as its first content. */
  static async create(text: string): Promise<MountedConfigMap> {
    const map = new MountedConfigMap(await mkdtemp(join(tmpdir(), 'sb-configmap-')));
    await map.update(text);
    await symlink(join('..data', CONFIG_MAP_KEY), map.file);
    return map;
  }

  /** The path the gateway is started with. */
  get file(): string {
    return join(this.dir, CONFIG_MAP_KEY);
  }

  /** Replaces the content by the `..data` swap. */
  async update(text: string): Promise<void> {
    const name = `..2026_11_27_10_00_00.${process.pid}${++this.#version}`;
    await mkdir(join(this.dir, name));
    await writeFile(join(this.dir, name, CONFIG_MAP_KEY), text);
    const tmp = join(this.dir, '..data_tmp');
    await symlink(name, tmp);
    await rename(tmp, join(this.dir, '..data'));
    if (this.#current) await rm(join(this.dir, this.#current), { recursive: true, force: true });
    this.#current = name;
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
