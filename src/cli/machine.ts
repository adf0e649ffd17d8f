/**
 * Where a figure was measured: the machine, its GPUs and every version that shapes the result
 * (driver, CUDA runtime, NCCL, Node, the addon). Benchmark results and profiles carry it whole.
 * A figure measured in loopback (two ranks on one device) says so in its label and its
 * `loopback`, so no report can take it for a two-GPU figure.
 */
import { cpus, hostname, platform, release } from 'node:os';
import { loadBinding, type DeviceProps } from '../runtime/binding.js';

export interface Machine {
  hostname: string;
  /** `<GPUs>x<name>` (`2xH200`), `-loopback` appended for loopback runs (`1xH200-loopback`), or `cpu<cores>`. */
  label: string;
  /** Measured with both ranks on one device (RuntimeOptions.loopback). */
  loopback: boolean;
  os: string;
  cpu: string;
  cores: number;
  node: string;
  backend: string;
  gpus: DeviceProps[];
  driverVersion: number;
  cudaRuntimeVersion: number;
  /** NCCL's version (e.g. 22803), or 0 where libnccl cannot be loaded. */
  nccl: number;
  addon: string;
}

export function describeMachine(backend: string, loopback = false): Machine {
  let gpus: DeviceProps[] = [],
    driverVersion = 0,
    cudaRuntimeVersion = 0,
    nccl = 0,
    addon = 'unavailable';
  try {
    const b = loadBinding();
    gpus = Array.from({ length: b.deviceCount() }, (_, i) => b.deviceProps(i));
    driverVersion = b.driverVersion();
    cudaRuntimeVersion = b.cudaRuntimeVersion;
    addon = b.version;
    try {
      nccl = b.ncclLoad();
    } catch {
      /* no libnccl: nccl stays 0 */
    }
  } catch {
    /* no addon: a CPU-only run */
  }
  const base =
    gpus.length > 0
      ? `${gpus.length}x${gpus[0]!.name.replace(/^NVIDIA\s+/, '').replace(/[^A-Za-z0-9]+/g, '')}`
      : `cpu${cpus().length}`;
  return {
    hostname: hostname(),
    label: loopback ? `${base}-loopback` : base,
    loopback,
    os: `${platform()} ${release()}`,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    node: process.version,
    backend,
    gpus,
    driverVersion,
    cudaRuntimeVersion,
    nccl,
    addon,
  };
}
