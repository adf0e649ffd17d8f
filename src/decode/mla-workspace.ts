/**
 * The attention's launch shape as the walk needs it. Its workspace (cu/model.h
 * memra_mla_workspace_bytes): per row, position tile and head, R floats of the tile's
 * unnormalized output and two of its max and exp-sum. A tile is 32 positions up to R = 512 and 8
 * above. The walk sizes its buffers with this on either backend;
 * test/unit/addon.test.ts holds it to the addon's own answer.
 */
export function mlaWorkspaceBytes(t: number, nh: number, P: number, R: number): number {
  const tile = R <= 512 ? 32 : 8;
  return t * Math.ceil(P / tile) * nh * (R + 2) * 4;
}

/**
 * The P up to which the attention is one kernel (cu/mla_parts.cuh ShortPositions): four tiles of
 * 32 up to R = 512, none above. The walk passes it as P when every row's position is below it;
 * test/unit/addon.test.ts holds it to the addon's answer.
 */
export function mlaShortPositions(R: number): number {
  return R <= 512 ? 128 : 0;
}

/** The P a step's attention is called with: the one-kernel bound when every row is below it. */
export function attendPositions(P: number, R: number, positions: readonly number[]): number {
  const short = mlaShortPositions(R);
  return P > short && positions.every((p) => p < short) ? short : P;
}
