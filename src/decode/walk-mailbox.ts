/**
 * Where a step's results sit in the ranks' mailboxes (mapped host memory the main thread reads):
 * rank 0's next tokens (i32 × t) at 0 and the hidden state (f32 × t·H) from HIDDEN_AT; with route
 * validation, each layer's ids (i32 × t·K) and weights (f32 × t·K), one stride per layer; then,
 * 8-byte aligned, the join profile's two stamp blocks (join-profile.ts), at the same offset in
 * both ranks' mailboxes; then each rank's device-barrier refusal word (barrier-watch.ts).
 */
import type { ModelConfig } from './model-config.js';
import { stampBlockBytes } from './join-profile.js';
import { REFUSAL_BYTES } from './barrier-watch.js';

export const HIDDEN_AT = 256;

export function routesAt(cfg: ModelConfig, maxBatch: number, layer: number): number {
  return HIDDEN_AT + maxBatch * cfg.hidden * 4 + layer * maxBatch * cfg.topk * 8;
}

export function stampsAt(cfg: ModelConfig, maxBatch: number): number {
  return Math.ceil(routesAt(cfg, maxBatch, cfg.layers) / 8) * 8;
}

export function refusalAt(cfg: ModelConfig, maxBatch: number): number {
  return stampsAt(cfg, maxBatch) + 2 * stampBlockBytes(cfg.layers);
}

export function mailboxBytesFor(cfg: ModelConfig, maxBatch: number): number {
  return refusalAt(cfg, maxBatch) + REFUSAL_BYTES;
}
