/**
 * Machine calibration: what one cross-process loopback round trip costs here (a 200-byte
 * write, the peer's echo, the read), in wall time and in this process's CPU time. Every
 * proxied call costs the gateway three such exchanges (client, Redis, backend), so this is
 * the floor under "gateway CPU per call" on this machine; on VMs, where waking a process on
 * another vCPU is expensive, it can be far higher than on bare metal.
 */
import { connect } from 'node:net';
import { spawnChild } from '../test/helpers/child.js';

const ECHO_SERVER = `
const net = require('node:net');
const srv = net.createServer((s) => { s.setNoDelay(true); s.on('data', (d) => s.write(d)); });
srv.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: srv.address().port })));
process.stdin.on('end', () => process.exit(0)); process.stdin.resume();
`;

export interface Calibration {
  roundTrips: number;
  wallUsPerRoundTrip: number;
  cpuUsPerRoundTrip: number;
  sysUsPerRoundTrip: number;
}

export async function calibrate(roundTrips = 5000): Promise<Calibration> {
  const child = await spawnChild({
    name: 'echo server',
    command: process.execPath,
    args: ['-e', ECHO_SERVER],
    stdin: 'pipe',
    ready: (line) => line.startsWith('{"port":'),
  });
  try {
    const { port } = JSON.parse(child.readyLine!) as { port: number };
    const socket = connect({ host: '127.0.0.1', port });
    socket.setNoDelay(true);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const payload = Buffer.alloc(200, 'x');
    const run = (n: number) =>
      new Promise<void>((resolve) => {
        let got = 0;
        let i = 0;
        const onData = (chunk: Buffer) => {
          got += chunk.length;
          while (got >= payload.length) {
            got -= payload.length;
            if (++i === n) {
              socket.off('data', onData);
              resolve();
              return;
            }
            socket.write(payload);
          }
        };
        socket.on('data', onData);
        socket.write(payload);
      });
    await run(500); // warm-up
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await run(roundTrips);
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    socket.destroy();
    return {
      roundTrips,
      wallUsPerRoundTrip: (wall * 1000) / roundTrips,
      cpuUsPerRoundTrip: (cpu.user + cpu.system) / roundTrips,
      sysUsPerRoundTrip: cpu.system / roundTrips,
    };
  } finally {
    await child.stop();
  }
}
