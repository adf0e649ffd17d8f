// The expert FFN halves, memra_expert_up and memra_expert_down: the column-tile product
// (cu/gemv_tile.cuh) with the matrix picked per slot on the device, grouped by expert.
//
// Block row y of a launch is group y: the y-th smallest owned expert some slot names, with the
// slots naming it in slot order. Its blocks stream that expert's weights once and apply them to
// T of the group's slots a pass (ExpertRows), or, to a group of T + 1 to 2T slots, 2T a pass over
// each half of the tile (kWholeGroups). Which slot lands in which pass changes no sum, so an
// output is the same whatever the grouping (the slice rule).
#include <stdint.h>

#include <atomic>
#include <type_traits>

#include "cu/gemv_launch.cuh"
#include "cu/gemv_tile.cuh"
#include "cu/model.h"

namespace {

using namespace memra_tile;  // the tile and its launcher, whose instances this file holds

// The expert FFN's first half streams two matrices a block: 4096 rows each (H = 4096: one block
// a tile) measured best (W1 and W3 of `bench` at t = 1: 55.2 us at 2048 rows, 49.1 at 4096).
constexpr unsigned kExpertUpRows = 4096;

constexpr unsigned kMaxSlots = MEMRA_MODEL_MAX_ROWS * MEMRA_MODEL_MAX_TOPK;
constexpr unsigned kMaskWords = MEMRA_MODEL_MAX_EXPERTS / 32;

struct ExpertGroup {
  uint64_t local;         // the expert's index among this rank's nE
  unsigned n;             // slots naming it
  const uint16_t* slots;  // their indices s * K + k, increasing (shared memory)
};

// The fast form's reach: every slot's id in two registers of one warp, every owned expert a bit
// of one word. Every preset's shape (`bench` at t = 8: 64 slots, 32 experts or 16 a rank).
constexpr unsigned kFastSlots = 64, kFastExperts = 32;

// Warp 0 alone, slots <= kFastSlots and nE <= kFastExperts: the ids read once (two loads a lane,
// both in flight together), the owned experts a ballot-built mask, the group's slots listed from
// the same registers. Each of expert_up's blocks finds its group between its wait and its first
// weight load, where the SM streams nothing; the general form spends two reads of the ids from L2
// and four barriers there, this one a read and the caller's one barrier. The same group: the
// y-th set bit is the y-th smallest owned expert named, and lanes then halves keep slot order.
__device__ __forceinline__ void FindGroupWarp(const int32_t* __restrict__ ids, unsigned slots,
                                              uint32_t e0, uint32_t nE, uint16_t* list,
                                              int32_t* chosen, unsigned* count) {
  const unsigned lane = threadIdx.x;
  const int64_t ea = lane < slots ? int64_t(memra_cu::LoadFresh(ids + lane)) - int64_t(e0) : -1;
  const int64_t eb = lane + 32 < slots ? int64_t(memra_cu::LoadFresh(ids + lane + 32)) - int64_t(e0) : -1;
  const bool oa = ea >= 0 && ea < int64_t(nE), ob = eb >= 0 && eb < int64_t(nE);
  const uint32_t bits = (oa ? 1u << ea : 0u) | (ob ? 1u << eb : 0u);
  uint32_t m = __reduce_or_sync(0xffffffffu, bits);
  const unsigned g = blockIdx.y;
  if (g >= unsigned(__popc(m))) {
    if (lane == 0) *chosen = -1;
    return;
  }
  for (unsigned k = 0; k < g; ++k) m &= m - 1;
  const int64_t e = __ffs(m) - 1;
  const uint32_t below = (1u << lane) - 1;
  const uint32_t ma = __ballot_sync(0xffffffffu, oa && ea == e), mb = __ballot_sync(0xffffffffu, ob && eb == e);
  if (oa && ea == e) list[__popc(ma & below)] = uint16_t(lane);
  if (ob && eb == e) list[__popc(ma) + __popc(mb & below)] = uint16_t(lane + 32);
  if (lane == 0) {
    *chosen = int32_t(e);
    *count = __popc(ma) + __popc(mb);
  }
}

// Every thread of the block calls it (it holds barriers); every block of a cluster gets the same
// answer, so a cluster returns whole when its group is empty.
__device__ bool FindGroup(const int32_t* __restrict__ ids, unsigned slots, uint32_t e0,
                          uint32_t nE, ExpertGroup* group) {
  __shared__ uint32_t present[kMaskWords];
  __shared__ uint16_t list[kMaxSlots];
  __shared__ int32_t chosen;
  __shared__ unsigned count;
  const unsigned tid = threadIdx.x;
  if (slots <= kFastSlots && nE <= kFastExperts) {
    if (tid < 32) FindGroupWarp(ids, slots, e0, nE, list, &chosen, &count);
    __syncthreads();
    if (chosen < 0) return false;
    *group = {uint64_t(chosen), count, list};
    return true;
  }
  for (unsigned i = tid; i < kMaskWords; i += blockDim.x) present[i] = 0;
  __syncthreads();
  for (unsigned q = tid; q < slots; q += blockDim.x) {
    const int64_t e = int64_t(memra_cu::LoadFresh(ids + q)) - int64_t(e0);
    if (e >= 0 && e < int64_t(nE)) atomicOr(&present[e / 32], 1u << (e % 32));
  }
  __syncthreads();
  if (tid == 0) {
    unsigned g = blockIdx.y;
    int32_t found = -1;
    for (unsigned w = 0; w < (nE + 31) / 32 && found < 0; ++w) {
      uint32_t m = present[w];
      const unsigned c = __popc(m);
      if (g >= c) {
        g -= c;
        continue;
      }
      for (unsigned k = 0; k < g; ++k) m &= m - 1;
      found = int32_t(w * 32 + __ffs(m) - 1);
    }
    chosen = found;
  }
  __syncthreads();
  if (chosen < 0) return false;
  if (tid < 32) {
    unsigned n = 0;
    for (unsigned base = 0; base < slots; base += 32) {
      const unsigned q = base + tid;
      const bool match = q < slots && int64_t(memra_cu::LoadFresh(ids + q)) - int64_t(e0) == chosen;
      const uint32_t m = __ballot_sync(0xffffffffu, match);
      if (match) list[n + __popc(m & ((1u << tid) - 1))] = uint16_t(q);
      n += __popc(m);
    }
    if (tid == 0) count = n;
  }
  __syncthreads();
  *group = {uint64_t(chosen), count, list};
  return true;
}

// At t = 1 a valid routing names each expert once: block row y is slot y alone, as owned or
// not, with no grouping pass (its barriers and reads would be the whole kernel's latency).
__device__ __forceinline__ bool SlotGroup(const int32_t* __restrict__ ids, uint32_t e0, uint32_t nE,
                                          ExpertGroup* group) {
  __shared__ uint16_t slot;
  const int64_t e = int64_t(memra_cu::LoadFresh(ids + blockIdx.y)) - int64_t(e0);
  if (e < 0 || e >= int64_t(nE)) return false;
  slot = uint16_t(blockIdx.y);
  *group = {uint64_t(e), 1, &slot};
  return true;
}

// The experts' sync words (cu/model.h): for group y, done[y] counts expert_up's finished blocks
// of the group, ready[y] is set by the last of them, seen[y] counts expert_down's blocks, whose
// last zeroes all three. expert_down's blocks of a group start as expert_up's last wave leaves SMs
// free, where a grid's wait would hold them until every group is done: at t = 8 expert_up is
// about 2.5 waves of blocks, and its last ran with half the SMs idle (the chain probe, traced:
// expert_up 181 us and expert_down 94 a layer against 152 and 76 of bytes; with the groups' own
// waits the step 11.20 -> 10.48 ms, t = 4 7.51 -> 7.26). At t = 1, one wave, the blocks waiting
// beside expert_up slowed it (3.965 -> 4.020 ms), and at t = 2 (passes of two rows) the roofline
// suite's step went 5.93-5.94 -> 6.02-6.04 ms: passes of four rows (t >= 3) wait for their group,
// the others for the grid.
template <int T>
constexpr bool kGroupWait = T >= 4;

struct GroupSync {
  unsigned *done, *ready, *seen;
  __device__ explicit GroupSync(unsigned* w)
      : done(w), ready(w + MEMRA_EXPERT_SYNC_GROUPS), seen(w + 2 * MEMRA_EXPERT_SYNC_GROUPS) {}
};

// Once this block's act is stored: the last block of group y to finish publishes the group. The
// fence before each count orders the block's stores before it; the last block's fence after the
// count orders every counted block's before the mark (the threadfence-reduction pattern). A mark
// already there was left by an expert_up no expert_down followed: its expert_down would take
// this launch's group for done before it is, so the launch traps instead.
__device__ __forceinline__ void SignalGroupDone(unsigned* words, unsigned y) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  const GroupSync g(words);
  __threadfence();
  if (atomicAdd(&g.done[y], 1u) + 1 == gridDim.x) {
    g.done[y] = 0;
    __threadfence();
    if (atomicExch(&g.ready[y], 1u) != 0) __trap();
  }
}

// Once this block of expert_down is past its wait: the group's last clears its ready word.
__device__ __forceinline__ void ReleaseGroup(unsigned* words, unsigned y) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  const GroupSync g(words);
  if (atomicAdd(&g.seen[y], 1u) + 1 == gridDim.x) {
    g.ready[y] = 0;
    g.seen[y] = 0;
  }
}

// Chunks a thread of expert_up loads before their FMAs. Passes of four rows at CW 4 take three,
// not the one kBatchChunks shrinks to at 32 accumulators: a chunk of the two matrices is 16
// registers, so three fit beside the accumulators (ptxas: 128 registers, 8 bytes spilled). The
// experts of `bench` at t = 8: 218.4 us at one, 202.7 at two, 198.9 at three
// (`scripts/probes/gemv-sweep.cu` with `batch`, which times the production layouts under others).
template <int CW, int T>
constexpr unsigned kExpertUpBatch = T == 4 && CW == 4 ? 3 : kBatchChunks<CW, 2, T>;

// A pass of `rows` (1 to T) of a group's slots: f(std::integral_constant<int, R>{}) with R the
// fewest rows, of 1, 2 and T, that hold them. At t = 4 and 8 an expert has about two slots and
// at t = 2 mostly one, so full passes did up to twice the FMAs its slots need, and at these
// batches the f32 FMAs cost about what the weights' bytes do (docs/performance.md). R changes no
// sum (the slice rule). A pass of one row reads x from L2, as the t = 1 launch does (GemvSmem:
// staging one row cost more than it saved here too, and made t = 2 slower than full passes).
template <int T, class F>
__device__ __forceinline__ void WithPassRows(unsigned rows, const F& f) {
  if constexpr (T >= 2) {
    if (rows == 1) return f(std::integral_constant<int, 1>{});
  }
  if constexpr (T >= 4) {
    if (rows == 2) return f(std::integral_constant<int, 2>{});
  }
  f(std::integral_constant<int, T>{});
}

// A group of more slots than a pass holds but at most two passes' worth (the launches at t = 5 to
// 8, passes of four rows) is one pass of 2T rows over each half of the block's tile in turn, a
// thread CW / 2 of its columns, so that the expert's weights stream once: in passes of T rows
// over the whole tile, the second pass read them again, from HBM by then (a block's tile takes
// about 60 us of its share of the stream, hundreds of MB through L2), and its blocks held their
// SMs twice as long. At `bench`'s t = 8, whose routing names 28.7 of 32 experts a layer as
// uniform picks would, that is about one expert a layer. The halves are the tile's columns and CW
// changes no sum (the slice rule). Where CW is 2 there is no half, and such a group takes the
// passes; so does any group of more (only a routing that names an expert twice in a row).
template <int T, int CW>
constexpr bool kWholeGroups = T == 4 && CW >= 4;

// Whether a group of n slots is whole, in a launch that asks for whole groups.
template <int T, int CW>
__device__ __forceinline__ bool IsWholeGroup(unsigned n) {
  static_assert(kWholeGroups<T, CW>, "a whole group needs a tile to halve");
  return n > T && n <= 2 * T;
}

// A whole group's rows for its epilogue, found from the group's list as it stores (row s is the
// group's slot s, none past n): an array of row pointers would hold eight of them, 16 registers,
// through the whole product.
struct GroupRows {
  float* out;
  uint64_t ld;
  const uint16_t* slots;  // the group's, in shared memory
  unsigned n;
  __device__ float* Row(unsigned s) const { return s < n ? out + slots[s] * ld : nullptr; }
};

// A whole group's x: row s of the pass is slot s's, the last slot's past n (its products stored
// nowhere).
template <int R>
__device__ __forceinline__ void GroupX(const float* (&xr)[R], const float* x, uint32_t perSlotRows, uint64_t ldx,
                                       const ExpertGroup& g) {
#pragma unroll
  for (int s = 0; s < R; ++s) xr[s] = x + uint64_t(g.slots[s < int(g.n) ? s : g.n - 1]) / perSlotRows * ldx;
}

// A shorter pass's chunks in flight: no more than the full pass's U, whose registers the kernel
// is sized for (its own kBatchChunks, more at fewer accumulators, made ptxas spill more).
__host__ __device__ constexpr unsigned PassBatch(unsigned passU, unsigned fullU) {
  return passU < fullU ? passU : fullU;
}

// The passes' part[]s share the start of the dynamic shared memory wherever a launch has passes
// of more than one row count (PartBytes: their static arrays together pass 48 KB).
template <int M, int T, int CW>
constexpr bool kPassPartDyn = T >= 2 || kDynamicPart<M, T, CW>;

// f32-ops.ts: silu(g) = f32(g / f32(1 + f32(exp(-g)))), then f32(silu * up).
__device__ __forceinline__ float SiluTimesUp(float g, float up) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up);
}

template <int T>
struct SiluGateUp {
  float* act[T];  // each row's slot row, null for a pass's unused rows
  __device__ void operator()(unsigned s, uint32_t f, const float (&v)[2]) const {
    if (act[s] == nullptr) return;
    act[s][f] = SiluTimesUp(v[0], v[1]);
  }
};

struct SiluGateUpGroup {
  GroupRows act;
  __device__ void operator()(unsigned s, uint32_t f, const float (&v)[2]) const {
    if (float* row = act.Row(s)) row[f] = SiluTimesUp(v[0], v[1]);
  }
};

// expert_up's whole group (IsWholeGroup), compiled apart from the kernel (not inlined): inline,
// the eight rows' registers reached the passes of four rows that nearly every group takes
// (ptxas: 116 bytes spilled where the kernel had none), and `bench`'s step at t = 8 was slower
// for it (the decode bench on an H100: 14.71 ms, the build before 14.38-14.41 on cards of the same
// read floor).
template <int T, int CW, unsigned U, bool kWide, bool kStage>
__device__ __noinline__ void UpWholeGroup(float* act, const float* xd, const uint16_t* w1, const uint16_t* w3,
                                          ExpertGroup g, uint32_t K, uint32_t H, uint32_t F, uint32_t col0,
                                          unsigned split) {
  constexpr int R = 2 * T, C = CW / 2;
  constexpr unsigned kU = PassBatch(kExpertUpBatch<C, R>, U);
  const uint16_t* const w[2] = {w1, w3};
  const float* xr[R];
  GroupX(xr, xd, K, H, g);
  const SiluGateUpGroup epi{{act, F, g.slots, g.n}};
  // The second half's x is the first's, staged already (GemvTile's kStaged; it returns on a barrier).
  GemvTile<R, 2, C, kWide, kStage, kU, kPassPartDyn<2, T, CW>>(xr, w, F, H, F, col0, split, epi);
  GemvTile<R, 2, C, kWide, kStage, kU, kPassPartDyn<2, T, CW>, kStage>(xr, w, F, H, F, col0 + kWarpCols * C, split,
                                                                         epi);
}

template <int T, int CW, bool kPerSlot, unsigned U, bool kWhole, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    expert_up(float* __restrict__ act, const float* __restrict__ xd,
              const int32_t* __restrict__ ids, const uint16_t* __restrict__ w1,
              const uint16_t* __restrict__ w3, uint32_t e0, uint32_t nE, uint32_t K, uint32_t H,
              uint32_t F, unsigned slots, unsigned split, unsigned* __restrict__ sync) {
  MEMRA_TRACE_KERNEL(kTraceExpertUp);
  // Which expert's weights to read is itself the router's output.
  PdlWait();
  PdlLaunchDependents();
  ExpertGroup g;
  if (!(kPerSlot ? SlotGroup(ids, e0, nE, &g) : FindGroup(ids, slots, e0, nE, &g))) return;
  const uint16_t* const w[2] = {w1 + g.local * H * F, w3 + g.local * H * F};
  const uint32_t col0 = (blockIdx.x / split) * kWarpCols * CW;
  bool whole = false;
  if constexpr (kWhole) {
    whole = IsWholeGroup<T, CW>(g.n);
    if (whole) UpWholeGroup<T, CW, U, kWide, kStage>(act, xd, w[0], w[1], g, K, H, F, col0, split);
  }
  if (!whole) {
    for (unsigned b = 0; b < g.n; b += T) {
      WithPassRows<T>(g.n - b, [&](auto rows) {
        constexpr int R = decltype(rows)::value;
        const float* xr[R];
        SiluGateUp<R> epi;
#pragma unroll
        for (int s = 0; s < R; ++s) {
          const unsigned i = b + s < g.n ? b + s : g.n - 1;
          const uint64_t q = g.slots[i];
          xr[s] = xd + (q / K) * H;
          epi.act[s] = b + s < g.n ? act + q * F : nullptr;
        }
        constexpr unsigned kU = R == T ? U : PassBatch(kExpertUpBatch<CW, R>, U);
        constexpr bool kS = kStage && R > 1;
        GemvTile<R, 2, CW, kWide, kS, kU, kPassPartDyn<2, T, CW>>(xr, w, F, H, F, col0, split, epi);
      });
    }
  }
  if constexpr (kGroupWait<T>) SignalGroupDone(sync, blockIdx.y);
}

template <int T>
struct StoreContrib {
  float* contrib[T];  // each row's slot row, null for a pass's unused rows
  __device__ void operator()(unsigned s, uint32_t i, const float (&v)[1]) const {
    if (contrib[s] != nullptr) contrib[s][i] = v[0];
  }
};

struct StoreContribGroup {
  GroupRows contrib;
  __device__ void operator()(unsigned s, uint32_t i, const float (&v)[1]) const {
    if (float* row = contrib.Row(s)) row[i] = v[0];
  }
};

// expert_down's whole group (IsWholeGroup), apart from the kernel as UpWholeGroup is (ptxas: 168
// bytes spilled inline, where the kernel's own spill 24). ready: the group's word (kGroupWait).
template <int T, int CW, unsigned U, bool kWide, bool kStage>
__device__ __noinline__ void DownWholeGroup(float* contrib, const float* act, const uint16_t* w2, ExpertGroup g,
                                            uint32_t H, uint32_t F, uint32_t col0, unsigned split,
                                            const unsigned* ready) {
  constexpr int R = 2 * T, C = CW / 2;
  constexpr unsigned kU = PassBatch(kBatchChunks<C, 1, R>, U);
  const uint16_t* const w[1] = {w2};
  const float* xr[R];
  GroupX(xr, act, 1, F, g);
  const StoreContribGroup epi{{contrib, H, g.slots, g.n}};
  GemvTile<R, 1, C, kWide, kStage, kU, kPassPartDyn<1, T, CW>, false, kGroupWait<T>>(xr, w, H, F, H, col0, split,
                                                                                    epi, ready);
  GemvTile<R, 1, C, kWide, kStage, kU, kPassPartDyn<1, T, CW>, kStage, kGroupWait<T>>(
      xr, w, H, F, H, col0 + kWarpCols * C, split, epi, ready);
}

template <int T, int CW, bool kPerSlot, unsigned U, bool kWhole, bool kWide, bool kStage>
__global__ void __launch_bounds__(kGemvThreads, 1)
    expert_down(float* __restrict__ contrib, const float* __restrict__ act,
                const int32_t* __restrict__ ids, const uint16_t* __restrict__ w2, uint32_t e0,
                uint32_t nE, uint32_t K, uint32_t H, uint32_t F, unsigned slots, unsigned split,
                unsigned* __restrict__ sync) {
  MEMRA_TRACE_KERNEL(kTraceExpertDown);
  // Only act is expert_up's: the ids are read before the wait, so the first batch of W2 is in
  // flight when expert_up finishes (GemvTile waits after loading it). They were written two
  // kernels back (the router), and this grid can start only once every block of expert_up has
  // returned from its own PdlWait, which waits for that kernel to complete: they are in L2.
  PdlLaunchDependents();
  ExpertGroup g;
  if (!(kPerSlot ? SlotGroup(ids, e0, nE, &g) : FindGroup(ids, slots, e0, nE, &g))) return;
  const uint16_t* const w[1] = {w2 + g.local * F * H};
  const uint32_t col0 = (blockIdx.x / split) * kWarpCols * CW;
  bool whole = false;
  if constexpr (kWhole) {
    whole = IsWholeGroup<T, CW>(g.n);
    if (whole) {
      DownWholeGroup<T, CW, U, kWide, kStage>(contrib, act, w[0], g, H, F, col0, split,
                                              kGroupWait<T> ? GroupSync(sync).ready + blockIdx.y : nullptr);
    }
  }
  if (!whole) {
    for (unsigned b = 0; b < g.n; b += T) {
      WithPassRows<T>(g.n - b, [&](auto rows) {
        constexpr int R = decltype(rows)::value;
        const float* xr[R];
        StoreContrib<R> epi;
#pragma unroll
        for (int s = 0; s < R; ++s) {
          const unsigned i = b + s < g.n ? b + s : g.n - 1;
          const uint64_t q = g.slots[i];
          xr[s] = act + q * F;
          epi.contrib[s] = b + s < g.n ? contrib + q * H : nullptr;
        }
        constexpr unsigned kU = R == T ? U : PassBatch(kBatchChunks<CW, 1, R>, U);
        constexpr bool kS = kStage && R > 1;
        GemvTile<R, 1, CW, kWide, kS, kU, kPassPartDyn<1, T, CW>, false, kGroupWait<T>>(
            xr, w, H, F, H, col0, split, epi, kGroupWait<T> ? GroupSync(sync).ready + blockIdx.y : nullptr);
      });
    }
  }
  if constexpr (kGroupWait<T>) ReleaseGroup(sync, blockIdx.y);
}

bool ExpertArgsOk(uint32_t t, uint32_t K) {
  return t <= MEMRA_MODEL_MAX_ROWS && K <= MEMRA_MODEL_MAX_TOPK;
}

struct ExpertUpArgs {
  float* act;
  const float* xd;
  const int32_t* ids;
  const uint16_t *w1, *w3;
  uint32_t e0, nE, K, H, F;
  unsigned* sync;
};

// Dynamic shared memory of a launch of passes of T rows of M matrices at CW (GemvSmem), kWhole
// with its whole groups' passes of 2T rows at CW / 2: part[] is the same size for both (T x CW
// accumulators a thread), so the staged x is the larger pass's, where it fits (else neither
// stages).
template <int M, int T, int CW, bool kWhole>
size_t ExpertSmem(uint32_t K, unsigned split, bool* stage) {
  if constexpr (kWhole) {
    static_assert(PartBytes<M, 2 * T, CW / 2, true>() == PartBytes<M, T, CW, kPassPartDyn<M, T, CW>>(),
                  "both passes' part[] at the same size");
    return GemvSmem<M, 2 * T, CW / 2, true>(K, split, stage);
  }
  return GemvSmem<M, T, CW, kPassPartDyn<M, T, CW>>(K, split, stage);
}

// f(kWhole): the launch with whole groups (IsWholeGroup) where it can have groups past a pass
// (`whole`: t > T) and its tiles have halves; the kernel of passes alone otherwise.
template <int T, int CW, class F>
cudaError_t WithWholeGroups(bool whole, const F& f) {
  if constexpr (kWholeGroups<T, CW>) {
    if (whole) return f(std::true_type{});
  }
  return f(std::false_type{});
}

// grid.y: one row of blocks a group, as many groups as there can be (slots, or nE if fewer).
// One pass of one row (T = 1) is the t = 1 launch: slot y is block row y (SlotGroup).
template <int T, int CW, unsigned U = kExpertUpBatch<CW, T>>
cudaError_t ExpertUpLaunch(const ExpertUpArgs& a, bool wide, unsigned slots, unsigned groups,
                           unsigned split, bool whole, cudaStream_t stream) {
  return WithWholeGroups<T, CW>(whole, [&](auto wholeGroups) {
    constexpr bool kWhole = decltype(wholeGroups)::value;
    static std::atomic<size_t> granted[4];  // one set an instance of this lambda: a kWhole each
    bool stage;
    const size_t smem = ExpertSmem<2, T, CW, kWhole>(a.H, split, &stage);
    return LaunchTiles(MEMRA_PICK4(expert_up, T, CW, T == 1, U, kWhole), a.F, CW, T == 1 ? slots : groups, split,
                       smem, granted[MEMRA_PICK4_AT], stream, a.act, a.xd, a.ids, a.w1, a.w3, a.e0,
                       a.nE, a.K, a.H, a.F, slots, split, a.sync);
  });
}

struct ExpertDownArgs {
  float* contrib;
  const float* act;
  const int32_t* ids;
  const uint16_t* w2;
  uint32_t e0, nE, K, H, F;
  unsigned* sync;
};

template <int T, int CW, unsigned U = kBatchChunks<CW, 1, T>>
cudaError_t ExpertDownLaunch(const ExpertDownArgs& a, bool wide, unsigned slots, unsigned groups,
                             unsigned split, bool whole, cudaStream_t stream) {
  return WithWholeGroups<T, CW>(whole, [&](auto wholeGroups) {
    constexpr bool kWhole = decltype(wholeGroups)::value;
    static std::atomic<size_t> granted[4];  // one set an instance of this lambda: a kWhole each
    bool stage;
    const size_t smem = ExpertSmem<1, T, CW, kWhole>(a.F, split, &stage);
    return LaunchTiles(MEMRA_PICK4(expert_down, T, CW, T == 1, U, kWhole), a.H, CW, T == 1 ? slots : groups,
                       split, smem, granted[MEMRA_PICK4_AT], stream, a.contrib, a.act, a.ids, a.w2, a.e0,
                       a.nE, a.K, a.H, a.F, slots, split, a.sync);
  });
}

// Rows a pass of a group takes: one at t = 1 (no grouping), then up to four (a valid routing
// gives an expert at most t slots, about tK/E of them on average: at t = 8 with E = 32 and K = 8,
// two, and three or four for a third of the experts). A group of five to eight slots is one pass
// of eight over each half of the tile (kWholeGroups); passes of two, re-reading the weights
// from HBM for any group past one pass, made `bench`'s experts at t = 8 stream at 2.7 TB/s.
constexpr int ExpertRows(uint32_t t) { return t == 1 ? 1 : (t == 2 ? 2 : 4); }

// The launch for passes of T rows at the widest CW that keeps SMs busy (PickCw). The first half
// at T = 4 stops at CW 4: at 8 its 64 accumulators and two matrices' loads spill (ptxas -v).
template <int T>
constexpr int ExpertUpCwMax = T >= 4 ? 4 : CwMax(T, 2);

template <int T>
cudaError_t ExpertUpRows(const ExpertUpArgs& a, unsigned slots, unsigned groups, unsigned split, bool whole,
                         cudaStream_t stream) {
  const auto ok = [](int c, const void* p) {
    const ExpertUpArgs& g = *static_cast<const ExpertUpArgs*>(p);
    return WideOk(g.w1, g.F, c) && WideOk(g.w3, g.F, c);
  };
  const int cw = PickCw(ExpertUpCwMax<T>, ok, &a, a.F, uint64_t(split) * groups);
  const bool wide = ok(cw, &a);
  if constexpr (ExpertUpCwMax<T> >= 8) {
    if (cw == 8) return ExpertUpLaunch<T, 8>(a, wide, slots, groups, split, whole, stream);
  }
  if constexpr (ExpertUpCwMax<T> >= 4) {
    if (cw == 4) return ExpertUpLaunch<T, 4>(a, wide, slots, groups, split, whole, stream);
  }
  return ExpertUpLaunch<T, 2>(a, wide, slots, groups, split, whole, stream);
}

template <int T>
cudaError_t ExpertDownRows(const ExpertDownArgs& a, unsigned slots, unsigned groups,
                           unsigned split, bool whole, cudaStream_t stream) {
  const auto ok = [](int c, const void* p) {
    const ExpertDownArgs& g = *static_cast<const ExpertDownArgs*>(p);
    return WideOk(g.w2, g.H, c);
  };
  const int cw = PickCw(CwMax(T, 1), ok, &a, a.H, uint64_t(split) * groups);
  const bool wide = ok(cw, &a);
  if constexpr (CwMax(T, 1) >= 8) {
    if (cw == 8) return ExpertDownLaunch<T, 8>(a, wide, slots, groups, split, whole, stream);
  }
  if constexpr (CwMax(T, 1) >= 4) {
    if (cw == 4) return ExpertDownLaunch<T, 4>(a, wide, slots, groups, split, whole, stream);
  }
  return ExpertDownLaunch<T, 2>(a, wide, slots, groups, split, whole, stream);
}

}  // namespace

extern "C" cudaError_t memra_expert_up(float* act, const float* xd, const int32_t* ids,
                                       const uint16_t* w1, const uint16_t* w3, uint32_t e0,
                                       uint32_t nE, uint32_t t, uint32_t K, uint32_t H,
                                       uint32_t F, unsigned* sync, cudaStream_t stream) {
  if (!ExpertArgsOk(t, K) || nE > MEMRA_MODEL_MAX_EXPERTS || (t > 2 && sync == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (t == 0 || K == 0 || F == 0 || nE == 0) return cudaSuccess;
  const ExpertUpArgs a{act, xd, ids, w1, w3, e0, nE, K, H, F, sync};
  const unsigned split = Split(H, kExpertUpRows), slots = t * K, groups = slots < nE ? slots : nE;
  const bool whole = t > uint32_t(ExpertRows(t));
  switch (ExpertRows(t)) {
    case 1: return ExpertUpRows<1>(a, slots, groups, split, whole, stream);
    case 2: return ExpertUpRows<2>(a, slots, groups, split, whole, stream);
    default: return ExpertUpRows<4>(a, slots, groups, split, whole, stream);
  }
}

extern "C" cudaError_t memra_expert_down(float* contrib, const float* act, const int32_t* ids,
                                         const uint16_t* w2, uint32_t e0, uint32_t nE, uint32_t t,
                                         uint32_t K, uint32_t H, uint32_t F, unsigned* sync,
                                         cudaStream_t stream) {
  if (!ExpertArgsOk(t, K) || nE > MEMRA_MODEL_MAX_EXPERTS || (t > 2 && sync == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (t == 0 || K == 0 || H == 0 || nE == 0) return cudaSuccess;
  const ExpertDownArgs a{contrib, act, ids, w2, e0, nE, K, H, F, sync};
  const unsigned split = Split(F), slots = t * K, groups = slots < nE ? slots : nE;
  const bool whole = t > uint32_t(ExpertRows(t));
  switch (ExpertRows(t)) {
    case 1: return ExpertDownRows<1>(a, slots, groups, split, whole, stream);
    case 2: return ExpertDownRows<2>(a, slots, groups, split, whole, stream);
    default: return ExpertDownRows<4>(a, slots, groups, split, whole, stream);
  }
}
