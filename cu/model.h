// The synthetic model's kernels (docs/model.md; the CPU oracle is src/decode/cpu-model.ts and
// src/decode/f32-ops.ts, which spell out every f32 operation). Each launcher enqueues on `stream`
// and returns cudaGetLastError(); a zero count launches nothing; t > MEMRA_MODEL_MAX_ROWS, or an
// argument past one of the limits below, returns cudaErrorInvalidValue without launching.
//
// THE SLICE RULE. Every kernel computes each output element the same way (same operations, same
// summation order) whatever slice of columns, heads or experts it is handed and whatever the
// batch t. That is what makes the sharded walk bit-identical to the unsharded one on the GPU.
// Reduction orders may differ from the CPU oracle's sequential order (the GPU and CPU agree
// within rounding, not bit for bit), but they may depend only on the reduction length.
//
// Layouts: activations are f32, row-major, one row per batch row s < t (t <= MEMRA_MODEL_MAX_ROWS);
// weights are bf16 bits (uint16_t), row-major; `ld*` arguments are row strides in elements.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The largest batch a model kernel takes (t), the session's maxBatch ceiling.
#define MEMRA_MODEL_MAX_ROWS 8

// The other limits a launcher enforces (cudaErrorInvalidValue past them; the addon refuses them
// first with a message). Each comes from where a kernel keeps its working set:
// memra_set_i32 carries its values in the launch's parameter space.
#define MEMRA_MODEL_MAX_I32_VALUES 12
// memra_mla_attention splits the positions over blocks (flash-decoding): nothing of P lives in
// shared memory, only its workspace grows with it (memra_mla_workspace_bytes). Up to R = 512 a
// block stages a tile's rows and up to 32 heads' queries; above, a lane keeps R / 128 float4 of a
// head's output in registers.
#define MEMRA_MODEL_MAX_POSITIONS 65536
#define MEMRA_MODEL_MAX_LATENT 2048
// memra_router keeps a row's taken-flags (E bits, 32 a lane) and its K picks in registers; the
// expert kernels and memra_moe_combine take the same K.
#define MEMRA_MODEL_MAX_EXPERTS 1024
#define MEMRA_MODEL_MAX_TOPK 64
// The fp8 block: H must be a multiple of it for memra_quantize / memra_dequantize.
#define MEMRA_MODEL_QUANT_BLOCK 128

// Programmatic dependent launch (cu/pdl.cuh): while `on`, the model launchers this thread calls
// let their kernel start before the previous kernel of the stream has finished (each kernel waits
// for it before reading anything but weights). The caller turns it on only when the previous
// work on the stream is a model kernel of the step; memra_gen_weights never takes it. Returns the
// previous setting. Off by default.
int memra_model_set_pdl(int on);

// Weight generation, bit-identical to src/decode/weights.ts generateTensor: for r < rows,
// c < cols, dst[r * cols + c] = bf16 of flat element  base + r * srcCols + colStart + c  of tensor
// `id` under `seed` (a dense [rows, cols] slice of the tensor). kind 0: matrix, w = f32(v * scale);
// kind 1: gain, g = f32(1 + f32(0.1f * v)); v = 2u - 1, u = (z >> 40) / 2^24 (docs/model.md's hash);
// another kind is cudaErrorInvalidValue. Indices wrap mod 2^64, as the hash does.
cudaError_t memra_gen_weights(uint16_t* dst, uint64_t seed, uint64_t id, uint64_t base,
                              uint64_t rows, uint64_t srcCols, uint64_t colStart, uint64_t cols,
                              int kind, float scale, cudaStream_t stream);

// dst[i] = vals[i] for i < n (n <= MEMRA_MODEL_MAX_I32_VALUES): a step's tokens or positions,
// carried by value in the launch (vals is read before the call returns; a captured graph keeps
// the values).
cudaError_t memra_set_i32(int32_t* dst, uint32_t n, const int32_t* vals, cudaStream_t stream);

// out[s, :] = f32(Emb[tokens[s], :]) for s < t. Emb is [V, H]; a token outside [0, V) writes
// NaN into its row (the host checks tokens before a step; this is the device's last guard).
cudaError_t memra_embed(float* out, const uint16_t* emb, const int32_t* tokens, uint32_t t,
                        uint32_t H, uint32_t V, cudaStream_t stream);

// out[s] = rmsnorm(in[s], g) for s < t (f32-ops.ts rmsnorm: ss = sum of f32(h*h) in f32,
// mean = ss / H, r = sqrt(mean + 1e-6f), out = f32(h / r) * g), each operation one rounding; the
// sum of squares runs in a fixed block order (H alone decides it). out may alias in.
cudaError_t memra_rmsnorm(float* out, const float* in, const uint16_t* gain, uint32_t t,
                          uint32_t H, cudaStream_t stream);

// out[s * ldo + j] = sum_k x[s * ldx + k] * W[k * ldw + j] for j < cols, s < t, k < K; W points
// at column 0 of the slice (a column slice of a wider matrix passes ldw = the full width). With
// `accumulate`, out[s * ldo + j] = f32(out[s * ldo + j] + sum) instead: a residual add fused into
// the product (one rounding, as a separate y += 1 * x would give). out must not overlap x. The
// sum's order depends on K and `split` alone (cu/gemv_tile.cuh): the blocks a column's K rows are
// cut over, 1 to 8, or 0 for the default of K (2048 rows a block). Give every slice of one matrix
// the same split; a narrow matrix wants more (the walk's choice per matrix). Products are fused
// (fmaf), which the oracle allows (f32-ops.ts: FMA differs by rounding only).
cudaError_t memra_gemv(float* out, uint64_t ldo, const float* x, uint64_t ldx,
                       const uint16_t* W, uint64_t ldw, uint32_t K, uint32_t cols, uint32_t t,
                       int accumulate, uint32_t split, cudaStream_t stream);

// normOut[s] = rmsnorm(x[s], gain) (memra_rmsnorm's bits), then out[s * ldo + j] = normOut[s] @ W
// for j < cols (memra_gemv's bits at split 8), in one launch: the MoE norm and the router's
// product. x and normOut are [t][K]; 1 <= cols <= MEMRA_MODEL_NORM_GEMV_MAX_COLS (one column tile
// of the split-8 product), K <= 2^24, else cudaErrorInvalidValue. normOut must not overlap x or out.
#define MEMRA_MODEL_NORM_GEMV_MAX_COLS 64
cudaError_t memra_norm_gemv(float* normOut, float* out, uint64_t ldo, const float* x, const uint16_t* gain,
                            const uint16_t* W, uint64_t ldw, uint32_t K, uint32_t cols, uint32_t t,
                            cudaStream_t stream);

// The attention's input products in one launch, for rows s < t of a [t][K]: c = a @ Wdkv (R
// columns) stored at cache[s * slotStride + pos[s] * R + r] (`cache`: this layer's rows of slot 0;
// a row whose pos[s] is outside [0, P) stores no c), and q[s * qcols + j] = a @ Wq (qcols columns,
// a rank's heads). Bit for bit what memra_gemv, memra_cache_write and memra_gemv give apart: each
// sum has memra_gemv's order for K.
cudaError_t memra_latent_query(float* q, const float* a, const uint16_t* wdkv, const uint16_t* wq,
                               float* cache, uint64_t slotStride, const int32_t* pos, uint32_t K,
                               uint32_t R, uint32_t qcols, uint32_t t, uint32_t P,
                               cudaStream_t stream);

// cache[((s * L + layer) * P + pos[s]) * R + r] = c[s * R + r]: row s of the batch is slot s.
// A row whose pos[s] is outside [0, P) writes nothing (the device's last guard; the host checks
// positions before a step). layer >= L is cudaErrorInvalidValue.
cudaError_t memra_cache_write(float* cache, const float* c, const int32_t* pos, uint32_t t,
                              uint32_t layer, uint32_t L, uint32_t P, uint32_t R,
                              cudaStream_t stream);

// Absorbed MLA attention for nh heads of each row s < t (arguments in MemraMlaArgs):
//   q_n = q[s * ldq + n * R ..] (n < nh), over cache positions j = 0 .. pos[s] of slot s:
//   s_j = f32(dot(q_n, cache_j) / sqrtf(R)); o = softmax(s) . cache (f32);
//   u[s * ldu + n * Dv + d] = sum_r o_r * Wuv[n][r][d].
// The positions are cut into tiles of memra_mla_position_tile(R); one block takes a tile for up
// to 32 heads (they share its cache rows, read once; with `pdl` on, it stages the rows below
// pos[s] before the kernel ahead completes, so those must have been written before the last
// kernel ahead that waits first, as a step's earlier steps wrote them), keeps the tile's max,
// exp-sum and unnormalized o per head in `work`, and a second kernel rescales and adds the tiles
// in tile order, normalizes, and multiplies by Wuv. Every order depends on R and the position count
// alone, so a head's u is the same whatever heads, rows or t a call carries. The softmax is the
// flash form (each tile's exps against its own max, rescaled once), which rounds differently from
// docs/model.md's two-pass form; the oracle comparison is within rounding. P <= MEMRA_MODEL_MAX_POSITIONS,
// R <= MEMRA_MODEL_MAX_LATENT, R % 16 == 0. A row whose pos[s] is outside [0, P) writes NaN into
// its heads' u (and reads no cache).
typedef struct MemraMlaArgs {
  float* u;              // [t][ldu] f32: head n's Dv outputs at n * Dv (nh * Dv <= ldu)
  uint64_t ldu;
  const float* q;        // [t][ldq] f32: head n's R-wide query at n * R (nh * R <= ldq)
  uint64_t ldq;
  const float* cache;    // this layer's rows of slot 0, [P][R] f32; slot s at cache + s * slotStride
  uint64_t slotStride;   // floats from one slot's layer to the next slot's (>= P * R)
  const int32_t* pos;    // [t]: row s attends positions 0 .. pos[s]
  const uint16_t* wuv;   // [nh][R][Dv] bf16: the first of these heads' blocks
  float* work;           // memra_mla_workspace_bytes(t, nh, P, R) bytes, 16-byte aligned
  uint32_t t, nh, P, R, Dv;
} MemraMlaArgs;

// Positions a tile of memra_mla_attention holds: 32 up to R = 512, 8 above.
uint32_t memra_mla_position_tile(uint32_t R);

// The P up to which memra_mla_attention is one kernel (128 up to R = 512, 0 above), with the same
// bits as the tiled form. P need not be the cache's length: a walk that knows every row's
// position is below this passes it as P to take the one kernel (a row at or past P is poisoned).
uint32_t memra_mla_short_positions(uint32_t R);

// Bytes of the workspace memra_mla_attention needs for t rows of nh heads over P positions: per
// row, tile and head, R floats of o and two of max and sum.
uint64_t memra_mla_workspace_bytes(uint32_t t, uint32_t nh, uint32_t P, uint32_t R);

cudaError_t memra_mla_attention(const MemraMlaArgs* args, cudaStream_t stream);

// Router: ids[s * K + k] = the K largest of logits[s * E ..], largest first, ties to the lower
// index (f32-ops.ts topk, its NaN rule included: an untaken NaN is picked only when it is the
// first untaken index); wts = softmax over those K logits. 1 <= K <= E <= MEMRA_MODEL_MAX_EXPERTS,
// K <= MEMRA_MODEL_MAX_TOPK.
cudaError_t memra_router(int32_t* ids, float* wts, const float* logits, uint32_t t, uint32_t E,
                         uint32_t K, cudaStream_t stream);

// Per 128-wide block k of row s: xs[s * H/128 + k] = max|b| / 448 (1 when the max is 0; NaN when
// the block holds a NaN, as Math.max gives); xq = e4m3(b / xs) nearest even, saturating at 448
// (one byte per element; e4m3.ts bit for bit, NaN -> 0x7f). H % MEMRA_MODEL_QUANT_BLOCK == 0.
cudaError_t memra_quantize(uint8_t* xq, float* xs, const float* b, uint32_t t, uint32_t H,
                           cudaStream_t stream);

// memra_router, memra_quantize and memra_dequantize in one launch, bit for bit as the three give:
// root's MoE head once the router logits are in (b: the normalized rows they came from).
cudaError_t memra_route_quant(int32_t* ids, float* wts, const float* logits, uint8_t* xq,
                              float* xs, float* xd, const float* b, uint32_t t, uint32_t E,
                              uint32_t K, uint32_t H, cudaStream_t stream);

// xd = f32(decode(xq)) * xs, per element (the peer's copy of the MoE input is rebuilt by this).
cudaError_t memra_dequantize(float* xd, const uint8_t* xq, const float* xs, uint32_t t,
                             uint32_t H, cudaStream_t stream);

// Expert FFN, first half, for every slot (s, k) whose expert e = ids[s * K + k] lies in
// [e0, e0 + nE): act[(s * K + k) * F + f] = silu(g_f) * up_f with g = xd[s] @ W1[e - e0] and
// up = xd[s] @ W3[e - e0] (W1, W3 hold this rank's nE experts, each [H, F]); silu(g) =
// g / (1 + exp(-g)). Slots owned by the other rank are not written. The slots are grouped by
// expert on the device, and up to four slots of an expert share one pass over its weights (at
// t <= 4, every slot: a valid routing names an expert at most once a row).
//
// sync (t > 2; unused at t = 1 and 2, may be null there): MEMRA_EXPERT_SYNC_BYTES of device memory,
// zeroed before its first use and then left to the two kernels: each group's blocks of
// memra_expert_up count themselves done there, and memra_expert_down's blocks of that group wait
// for that count instead of for the whole grid, so they start on the SMs expert_up's last wave
// leaves; its last block of a group zeroes the group's words again. So every memra_expert_up with
// sync words must be followed, on its stream, by the memra_expert_down with the same words, and
// two pairs must not share them at once (one set a stream). A memra_expert_down that waits about
// a second without its group's count traps (the words were not expert_up's).
cudaError_t memra_expert_up(float* act, const float* xd, const int32_t* ids, const uint16_t* w1,
                            const uint16_t* w3, uint32_t e0, uint32_t nE, uint32_t t, uint32_t K,
                            uint32_t H, uint32_t F, unsigned* sync, cudaStream_t stream);

// Expert FFN, second half: contrib[(s * K + k) * H + i] = act[(s * K + k)] @ W2[e - e0] for the
// same owned slots (W2 holds nE experts, each [F, H]), grouped the same way. Other slots are not
// written. For both: K <= MEMRA_MODEL_MAX_TOPK; each output's sum has memra_gemv's order for its
// K (H, then F). With PDL on (memra_model_set_pdl), memra_expert_down reads ids before it waits
// for the kernel ahead (only act must be that kernel's): ids must be older, as the walk's
// expert_up, which waits for the router, makes them. At t > 2 it waits on sync (above).
cudaError_t memra_expert_down(float* contrib, const float* act, const int32_t* ids,
                              const uint16_t* w2, uint32_t e0, uint32_t nE, uint32_t t,
                              uint32_t K, uint32_t H, uint32_t F, unsigned* sync,
                              cudaStream_t stream);

// Groups a launch of the experts can have (slots or experts, whichever is fewer), and the sync
// words of memra_expert_up and memra_expert_down: three a group.
#define MEMRA_EXPERT_SYNC_GROUPS (MEMRA_MODEL_MAX_ROWS * MEMRA_MODEL_MAX_TOPK)
#define MEMRA_EXPERT_SYNC_BYTES (3 * MEMRA_EXPERT_SYNC_GROUPS * 4)

// The MoE merge and residual: for each row s and element i, moe = 0; for k = 0 .. K-1 in slot
// order, moe = f32(moe + f32(wts[s*K+k] * c)) where c = (ids[s*K+k] < splitE ? lo : hi)
// [(s*K+k)*H + i]; then h[s*H + i] = f32(h + moe). Unsharded: lo == hi. K <= MEMRA_MODEL_MAX_TOPK.
cudaError_t memra_moe_combine(float* h, const float* wts, const int32_t* ids, const float* lo,
                              const float* hi, uint32_t splitE, uint32_t t, uint32_t K,
                              uint32_t H, cudaStream_t stream);

// memra_moe_combine, then out[s] = rmsnorm(h[s], gain) (memra_rmsnorm's bits) in the same launch:
// the norm that follows a merge when nothing comes between them (the next layer's attention norm,
// or the final one). out must not overlap h, wts, ids, lo or hi. With PDL on, it reads wts, ids and
// h (up to 8192 elements a row) before it waits for the kernel ahead, as memra_expert_down reads
// ids: they must be older than a kernel that waits before it lets the next start (the walk's
// expert_up, between the residual and router, and the merge).
cudaError_t memra_moe_combine_norm(float* h, const float* wts, const int32_t* ids, const float* lo,
                                   const float* hi, uint32_t splitE, uint32_t t, uint32_t K,
                                   uint32_t H, float* out, const uint16_t* gain,
                                   cudaStream_t stream);

// out[s] = the index of the largest logits[s * V + j], the lowest such index on ties (-0 == +0).
// NaN never wins unless the whole row is NaN (then 0). f32-ops.ts argmax differs in one case: a
// NaN at index 0 wins there (nothing compares greater than it). 1 <= V <= INT32_MAX.
cudaError_t memra_argmax(int32_t* out, const float* logits, uint32_t t, uint32_t V,
                         cudaStream_t stream);

#ifdef __cplusplus
}
#endif
