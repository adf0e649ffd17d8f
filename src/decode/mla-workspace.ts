/**
 * The attention's workspace (cu/model.h memra_mla_workspace_bytes): per row, position tile and
 * head, R floats of the tile's unnormalized output and two of its max and exp-sum. A tile is 32
 * positions up to R = 512 and 8 above. The walk sizes its buffers with this on either backend;
 * test/unit/addon.test.ts holds it to the addon's own answer.
 */
export function mlaWorkspaceBytes(t: number, nh: number, P: number, R: number): number {
  const tile = R <= 512 ? 32 : 8;
  return t * Math.ceil(P / tile) * nh * (R + 2) * 4;
}
