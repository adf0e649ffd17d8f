/**
 * A walk: which rank runs which piece of a layer (layer-pieces.ts), and the joins between them
 * (walk-joins.ts). The device walk (device-walk.ts) drives one a step: the inputs first, then the
 * body (the embedding and every layer), which a step graph may capture and replay.
 */
import type { Transport } from '../runtime/transports/transport.js';
import type { DecodeConfig } from './decode-config.js';

export interface LayerWalk {
  /** How many ranks hold h once a step is done (rank 0, and in the replicated walk rank 1 too). */
  readonly holders: number;
  /**
   * Whether rank 0's last merge of a step also makes the final norm (LayerPieces.merge): then the
   * tail starts at the logits.
   */
  readonly finalNormInMerge: boolean;
  /** The step's tokens and positions onto the ranks that read them: host values, ahead of the body. */
  inputs(tokens: readonly number[], positions: readonly number[]): void;
  /** h = Emb[tokens] on the ranks that hold h. */
  embed(t: number): void;
  /**
   * Layer l for t rows through transport `tr` (none unsharded). Returns a promise only when the
   * seed walk's EP step goes through its graph slot or is timed, neither of which a step graph
   * holds.
   */
  layer(l: number, t: number, tr: Transport | undefined, dc: DecodeConfig): void | Promise<void>;
}
