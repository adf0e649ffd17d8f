/**
 * The decode bench's kernel table: a step's model kernels, each timed alone by a pair of events
 * (src/decode/device-spans.ts), grouped by what they compute: launches a step, device µs a step,
 * and the bytes they must move over that time. A gemv is named for the matrix its shape is in the
 * model; the experts' bytes come from the step's routing (each distinct expert once).
 */
import type { ModelConfig } from '../src/decode/model-config.js';
import type { Span } from '../src/decode/device-spans.js';
import { distinctExperts } from './step-bytes.js';

/** A gemv's matrix, by its shape (K rows, cols columns) in `cfg`. */
function matrixName(cfg: ModelConfig, K: number, cols: number): string {
  const { hidden: H, heads: N, latent: R, headDim: Dv, experts: E, vocab: V } = cfg;
  if (K === H && cols === N * R) return 'Wq';
  if (K === H && cols === R) return 'Wdkv';
  if (K === N * Dv && cols === H) return 'Wo';
  if (K === H && cols === E) return 'Wr';
  if (K === H && cols === V) return 'Wvocab';
  return `${K}x${cols}`;
}

export interface KernelStep {
  spans: Span[];
  /** Row s's position this step. */
  positions: readonly number[];
  /** Each layer's expert ids this step. */
  routes: readonly ArrayLike<number>[];
}

/** The kernel a span timed, and the bytes it must move (its weights and activations). */
function kernelBytes(
  cfg: ModelConfig,
  span: Span,
  step: KernelStep,
  layerOf: (name: string) => number,
): [string, number] {
  const a = span.args;
  const f32 = 4;
  switch (span.label) {
    case 'Gemv': {
      const [K, cols, t] = [a[6]!, a[7]!, a[8]!];
      return [`gemv ${matrixName(cfg, K, cols)}`, K * cols * 2 + t * (K + cols) * f32];
    }
    case 'ExpertUp': {
      const l = layerOf('ExpertUp');
      const [t, H, F] = [a[7]!, a[9]!, a[10]!];
      return ['expert_up', distinctExperts(step.routes[l]!) * 2 * H * F * 2 + t * H * f32];
    }
    case 'ExpertDown': {
      const l = layerOf('ExpertDown');
      const [t, K, H, F] = [a[6]!, a[7]!, a[8]!, a[9]!];
      return ['expert_down', distinctExperts(step.routes[l]!) * F * H * 2 + t * K * (F + H) * f32];
    }
    case 'MlaAttention': {
      const [nh, R, Dv] = [a[10]!, a[12]!, a[13]!];
      const rows = step.positions.reduce((x, p) => x + p + 1, 0);
      return ['mla_attention', nh * R * Dv * 2 + rows * R * f32 + step.positions.length * nh * R * f32];
    }
    case 'Rmsnorm':
      return ['rmsnorm', a[3]! * a[4]! * 2 * f32 + a[4]! * 2];
    case 'NormGemv': {
      const [K, cols, t] = [a[7]!, a[8]!, a[9]!];
      return [`rmsnorm+gemv ${matrixName(cfg, K, cols)}`, K * (cols + 1) * 2 + t * (3 * K + cols) * f32];
    }
    case 'LatentQuery': {
      const [K, R, qcols, t] = [a[7]!, a[8]!, a[9]!, a[10]!];
      return ['latent_query (Wdkv, Wq)', K * (R + qcols) * 2 + t * (K + R + qcols) * f32];
    }
    case 'CacheWrite':
      return ['cache_write', a[3]! * a[7]! * 2 * f32];
    case 'Router':
      return ['router', a[3]! * a[4]! * f32];
    case 'RouteQuant':
      return ['route_quant', a[7]! * a[8]! * f32 + a[7]! * a[10]! * (2 * f32 + 1)];
    case 'Quantize':
    case 'Dequantize':
      return [span.label.toLowerCase(), a[3]! * a[4]! * (f32 + 1)];
    case 'MoeCombine':
      return ['moe_combine', a[6]! * a[7]! * a[8]! * f32 + a[6]! * a[8]! * 2 * f32];
    case 'MoeCombineNorm':
      return ['moe_combine+rmsnorm', a[6]! * a[7]! * a[8]! * f32 + a[6]! * a[8]! * 3 * f32 + a[8]! * 2];
    case 'Argmax':
      return ['argmax', a[2]! * a[3]! * f32];
    case 'Embed':
      return ['embed', a[3]! * a[4]! * (2 + f32)];
    case 'Axpy':
      return ['axpy', a[2]! * 3 * f32];
    case 'ToMailbox':
      return ['to_mailbox', a[2]!];
    case 'SetI32':
      return ['set_i32', a[1]! * 4];
    default:
      return [span.label, 0];
  }
}

export interface KernelLine {
  kernel: string;
  launches: number;
  /** Device µs a step, one sample per step. */
  us: number[];
  /** Bytes a step, one per step (the experts' follow the routing). */
  bytes: number[];
}

/** Group each step's spans by kernel; every step must launch the same kernels. */
export function kernelLines(cfg: ModelConfig, steps: readonly KernelStep[]): KernelLine[] {
  const lines = new Map<string, KernelLine>();
  steps.forEach((step, i) => {
    const seen = new Map<string, number>();
    const layerOf = (name: string): number => {
      const n = seen.get(name) ?? 0;
      seen.set(name, n + 1);
      return n;
    };
    const perStep = new Map<string, { us: number; bytes: number; launches: number }>();
    for (const span of step.spans) {
      const [kernel, bytes] = kernelBytes(cfg, span, step, layerOf);
      const x = perStep.get(kernel) ?? { us: 0, bytes: 0, launches: 0 };
      perStep.set(kernel, { us: x.us + span.us, bytes: x.bytes + bytes, launches: x.launches + 1 });
    }
    for (const [kernel, x] of perStep) {
      const line = lines.get(kernel) ?? { kernel, launches: x.launches, us: [], bytes: [] };
      if (line.launches !== x.launches)
        throw new Error(`kernel table: step ${i} launches ${kernel} ${x.launches} times, step 0 ${line.launches}`);
      line.us.push(x.us);
      line.bytes.push(x.bytes);
      lines.set(kernel, line);
    }
  });
  return [...lines.values()].sort((p, q) => q.us.reduce((a, b) => a + b, 0) - p.us.reduce((a, b) => a + b, 0));
}
