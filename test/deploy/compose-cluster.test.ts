/**
 * docker-compose.cluster.yml, the Redis Cluster variant of the development stack (issue 17),
 * applied over docker-compose.yml as `docker compose -f docker-compose.yml -f
 * docker-compose.cluster.yml` does: no Docker engine here, so the files are checked
 * statically (as compose.test.ts does for the base file), and the mounted gateway config is
 * parsed by the app's own loader. That the gateway serves a real cluster is
 * test/replicas/replicas-cluster.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { composeInterpolateTree, composeVariablesInTree, readRepoFile } from './support.js';

interface Service {
  image?: string;
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

const raw: unknown = parseYaml(readRepoFile('docker-compose.cluster.yml'), { merge: true });
const variant = composeInterpolateTree(raw, {}) as ComposeFile;
const base = composeInterpolateTree(parseYaml(readRepoFile('docker-compose.yml'), { merge: true }), {}) as ComposeFile;
const nodes = Object.keys(variant.services).filter((name) => name.startsWith('redis-node-'));

/** The gateway's config file as the variant mounts it, with the base service's environment. */
function mountedConfig(): { file: string; raw: Record<string, unknown> } {
  const target = base.services.switchboard!.volumes![0]!.split(':')[1];
  const mount = variant.services.switchboard!.volumes?.find((v) => v.split(':')[1] === target);
  assert.ok(mount, `the variant mounts a config over ${target}`);
  assert.equal(mount.split(':')[2], 'ro');
  const file = mount.split(':')[0]!.replace(/^\.\//, '');
  return { file, raw: parseYaml(readRepoFile(file)) as Record<string, unknown> };
}

describe('docker-compose.cluster.yml', () => {
  test('three cluster nodes, each announcing its service name, health-checked, with a named volume', () => {
    assert.deepEqual(nodes, ['redis-node-1', 'redis-node-2', 'redis-node-3']);
    for (const name of nodes) {
      const node = variant.services[name]!;
      assert.equal(node.image, base.services.redis!.image, 'the same Redis image as the base stack');
      const command = node.command!.join(' ');
      assert.match(command, /^redis-server .*--cluster-enabled yes/);
      assert.match(command, new RegExp(`--cluster-announce-hostname ${name} --cluster-preferred-endpoint-type hostname`));
      assert.deepEqual(node.healthcheck!.test, ['CMD', 'redis-cli', 'ping']);
      const volume = node.volumes!.find((v) => v.endsWith(':/data'))!.split(':')[0]!;
      assert.ok(variant.volumes && volume in variant.volumes, `volume ${volume} is declared`);
    }
  });

  test('the init job waits for every node and forms the cluster once', () => {
    const init = variant.services['redis-cluster-init']!;
    assert.deepEqual(Object.keys(init.depends_on!).sort(), nodes);
    for (const { condition } of Object.values(init.depends_on!)) assert.equal(condition, 'service_healthy');
    const script = init.command!.join(' ');
    assert.match(script, /cluster_state:ok \|\|/, 'skipped when the cluster already exists');
    assert.match(script, new RegExp(`redis-cli --cluster create ${nodes.map((n) => `${n}:6379`).join(' ')} --cluster-replicas 0 --cluster-yes`));
  });

  test('the gateway starts after the init job, with the cluster config mounted over the standalone one', () => {
    assert.deepEqual(variant.services.switchboard!.depends_on, { 'redis-cluster-init': { condition: 'service_completed_successfully' } });
    assert.equal(mountedConfig().file, 'deploy/compose/switchboard-cluster.yaml');
  });

  test('compose variables all have development defaults', () => {
    for (const v of composeVariablesInTree(raw)) assert.ok(v.fallback, `\${${v.name}} has no default`);
  });
});

describe('deploy/compose/switchboard-cluster.yaml', () => {
  const env = base.services.switchboard!.environment ?? {};
  const { raw: clusterRaw } = mountedConfig();
  const cluster = parseConfig(clusterRaw, env);

  test('is a valid config in cluster mode seeded with every node', () => {
    assert.equal(cluster.redis?.mode, 'cluster');
    assert.deepEqual(cluster.redis?.nodes, nodes.map((n) => `redis://${n}:6379`));
  });

  test('is the standalone stack config but for `redis`', () => {
    const standalone = parseConfig(parseYaml(readRepoFile('deploy/compose/switchboard.yaml')), env);
    assert.deepEqual({ ...cluster, redis: undefined }, { ...standalone, redis: undefined });
    assert.equal(cluster.redis?.keyPrefix, standalone.redis?.keyPrefix);
  });
});
