/**
 * The TP link's device constants, mirrored once for TypeScript: the refusal words of
 * cu/kernels.h and the LL layout of cu/tp_ll_chunks.cuh. The CPU reference, which emulates those
 * kernels, takes them from here; on CUDA the addon reports its own, and `checkLinkConstants`
 * holds them against this mirror when a link opens, so an edit on one side alone fails by name
 * instead of as a wrong layout.
 */

/** A device barrier's wait outlived its bound before the peer arrived (MEMRA_REFUSED_ENTRY). */
export const REFUSED_ENTRY = 40043;
/** A device barrier's wait outlived its bound before the peer finished (MEMRA_REFUSED_EXIT). */
export const REFUSED_EXIT = 40044;
/** The most blocks one one-shot all-reduce launches (kArMaxBlocks, cu/tp_ar.cu). */
export const AR_MAX_BLOCKS = 72;
/** Chunks one LL join may take (kMaxChunks, cu/tp_ll_chunks.cuh). */
export const LL_MAX_CHUNKS = 8192;
/** Bytes of one rank's LL state: each chunk's epoch, then the peer's ack of it (LlState). */
export const LL_STATE_BYTES = 2 * LL_MAX_CHUNKS * 4;
/** The most values one LL join may move: kMaxChunks chunks of kChunkLines lines, two values a line. */
export const LL_MAX_VALUES = LL_MAX_CHUNKS * 256 * 2;
/** Epochs whose LL receive slots are live at once (kLlDepth), a power of two. */
export const LL_DEPTH = 4;

/** What a worker reports of its backend's link kernels (`linkConstants` in device-worker.ts). */
export interface LinkConstants {
  signalBytes: number;
  maxBlocks: number;
  llStateBytes: number;
  llDepth: number;
  llMaxValues: number;
  refusedEntry: number;
  refusedExit: number;
}

/** Throws naming every constant where `reported` (from `who`) and this mirror disagree. */
export function checkLinkConstants(reported: LinkConstants, who: string): void {
  const mirror: Omit<LinkConstants, 'signalBytes'> = {
    maxBlocks: AR_MAX_BLOCKS,
    llStateBytes: LL_STATE_BYTES,
    llDepth: LL_DEPTH,
    llMaxValues: LL_MAX_VALUES,
    refusedEntry: REFUSED_ENTRY,
    refusedExit: REFUSED_EXIT,
  };
  const wrong = Object.entries(mirror).flatMap(([k, v]) => {
    const got = reported[k as keyof LinkConstants];
    return got === v ? [] : [`${k} ${got} (src/runtime/link-constants.ts has ${v})`];
  });
  if (wrong.length > 0)
    throw new Error(
      `${who}: the link kernels' constants differ from their TypeScript mirror: ${wrong.join(', ')}; ` +
        'rebuild the addon (npm run build:addon) or correct the mirror',
    );
}
