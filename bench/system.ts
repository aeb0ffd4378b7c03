/**
 * What the bench reads from the operating system and from Redis: process CPU time and RSS
 * (Linux /proc), machine facts, `INFO commandstats` / `INFO memory`.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import type { Redis } from 'ioredis';

let clockTicks: number | undefined;

/** Clock ticks per second (`getconf CLK_TCK`), the unit of utime/stime in /proc/<pid>/stat. */
export function clkTck(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU time (user + system, all threads) a process has used so far, in µs. */
export function processCpuUs(pid: number): number {
  const { userUs, systemUs } = processCpuSplitUs(pid);
  return userUs + systemUs;
}

/** {@link processCpuUs} in its two parts: in user space and in the kernel, in µs. */
export function processCpuSplitUs(pid: number): { userUs: number; systemUs: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) is in parentheses and may contain spaces: count after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime is field 14, stime field 15.
  return { userUs: (Number(fields[11]) * 1e6) / clkTck(), systemUs: (Number(fields[12]) * 1e6) / clkTck() };
}

/**
 * System calls a process has made so far that read or write (`syscr`, `syscw` in
 * /proc/<pid>/io; socket reads and writes count, epoll waits do not). Unlike CPU time this
 * does not move with a noisy host, so it shows whether a change saved socket traffic.
 */
export function processSyscalls(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(io)?.[1] ?? NaN);
  return { reads: field('syscr'), writes: field('syscw') };
}

/** Resident set size of a process, in bytes (VmRSS). */
export function processRssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  return match ? Number(match[1]) * 1024 : NaN;
}

/** Open file descriptor limit (soft, hard) of a process. */
export function fdLimit(pid: number | 'self' = 'self'): { soft: number; hard: number } {
  const limits = readFileSync(`/proc/${pid}/limits`, 'utf8');
  const match = /^Max open files\s+(\S+)\s+(\S+)/m.exec(limits);
  const n = (s: string | undefined) => (s === undefined || s === 'unlimited' ? Infinity : Number(s));
  return { soft: n(match?.[1]), hard: n(match?.[2]) };
}

export interface MachineInfo {
  cpuModel: string;
  cores: number;
  availableParallelism: number;
  memoryGiB: number;
  node: string;
  platform: string;
  kernel: string;
  date: string;
  fdLimit: { soft: number; hard: number };
}

export function machineInfo(): MachineInfo {
  let cpuModel = 'unknown';
  try {
    cpuModel = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpuModel;
  } catch {
    // not Linux
  }
  return {
    cpuModel,
    cores: os.cpus().length,
    availableParallelism: os.availableParallelism(),
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    kernel: os.release(),
    date: new Date().toISOString(),
    fdLimit: fdLimit(),
  };
}

/** `INFO commandstats` as command → calls. */
export async function commandStats(redis: Redis): Promise<Map<string, number>> {
  const text = await redis.info('commandstats');
  const stats = new Map<string, number>();
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) stats.set(match[1]!, Number(match[2]));
  return stats;
}

/** Calls per command between two snapshots, leaving out INFO (the bench's own probe). */
export function commandDelta(before: Map<string, number>, after: Map<string, number>): { total: number; byCommand: Record<string, number> } {
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const [cmd, calls] of after) {
    if (cmd === 'info') continue;
    const d = calls - (before.get(cmd) ?? 0);
    if (d > 0) {
      byCommand[cmd] = d;
      total += d;
    }
  }
  return { total, byCommand };
}

export async function redisInfoField(redis: Redis, section: string, field: string): Promise<number> {
  const text = await redis.info(section);
  const match = new RegExp(`^${field}:(\\d+)`, 'm').exec(text);
  return match ? Number(match[1]) : NaN;
}

/** Whole-machine CPU time so far from /proc/stat, in µs summed over all cores: busy (not idle/iowait) and steal. */
export function machineCpuUs(): { busy: number; steal: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number) as number[];
  const tick = 1e6 / clkTck();
  return { busy: (user! + nice! + system! + irq! + softirq!) * tick, steal: (steal ?? 0) * tick };
}

/** The current commit and whether src/ has uncommitted changes (others may be editing it). */
export function gitState(cwd: string): { commit: string; srcDirty: number } {
  try {
    const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd, encoding: 'utf8' }).split('\n').filter(Boolean).length;
    return { commit, srcDirty: dirty };
  } catch {
    return { commit: 'unknown', srcDirty: -1 };
  }
}
