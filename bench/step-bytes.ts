/**
 * The fewest bytes a decode step must read from device memory, from the model and the step's own
 * routing: every attention weight once, each expert some row routes to once (however many rows
 * or slots name it), the cache rows the attention reads, the final norm and the vocabulary, and
 * the embedding rows. Activations are left out (a few MB a step against GBs of weights). The
 * step's floor is these bytes over the card's measured read rate.
 */
import type { ModelConfig } from '../src/decode/model-config.js';

const BF16 = 2;
const F32 = 4;

/** Bytes of one layer's attention and router weights and norm gains (bf16). */
export function attentionWeightBytes(cfg: ModelConfig): number {
  const { hidden: H, heads: N, latent: R, headDim: Dv, experts: E } = cfg;
  return (H * N * R + N * R * Dv + H * R + N * Dv * H + H * E + 2 * H) * BF16;
}

/** Bytes of one expert's three matrices (bf16). */
export function expertBytes(cfg: ModelConfig): number {
  return 3 * cfg.hidden * cfg.ffn * BF16;
}

/** Distinct experts a layer's routes name (t·K ids). */
export function distinctExperts(ids: ArrayLike<number>): number {
  return new Set(Array.from(ids)).size;
}

export interface StepBytes {
  total: number;
  attention: number;
  experts: number;
  cache: number;
  vocab: number;
}

/** `positions[s]`: row s's position; `routes[l]`: layer l's expert ids (from a validated step). */
export function stepBytes(
  cfg: ModelConfig,
  positions: readonly number[],
  routes: readonly ArrayLike<number>[],
): StepBytes {
  const { hidden: H, vocab: V, latent: R, layers: L } = cfg;
  if (routes.length !== L) throw new Error(`stepBytes: ${routes.length} layers of routes, the model has ${L}`);
  const attention = L * attentionWeightBytes(cfg);
  const experts = routes.reduce((a, ids) => a + distinctExperts(ids) * expertBytes(cfg), 0);
  const cache = L * positions.reduce((a, p) => a + (p + 1) * R * F32, 0);
  const vocab = (H * V + H) * BF16 + positions.length * H * BF16;
  return { total: attention + experts + cache + vocab, attention, experts, cache, vocab };
}
