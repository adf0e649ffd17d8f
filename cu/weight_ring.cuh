// A thread's ring of weight chunks in shared memory, filled by cp.async: the products at eight
// rows (cu/gemv_tile.cuh) hold 64 accumulators a thread, which left registers for one chunk of
// weights in flight (64 bytes a thread, 32 KB an SM), and each warp's loads then waited a round
// trip to HBM between its batches of FMAs. Copies into shared memory hold no register while they
// fly, so a thread keeps its next chunks coming while it multiplies the one that has landed.
//
// Found with the chain probe (scripts/probes/step-timeline-probe.cu, traced, t = 8): latent_query
// 50.0 -> 43.6 us a layer with four chunks a thread in flight, the step 11.35 -> 11.19 ms. From
// four rows (two chunks deep, the experts' passes too) it gained 0.04 ms at t = 4 and lost 0.02 at
// t = 8, so the products take it at eight rows (MEMRA_GEMV_RING_MIN_T).
//
// Each thread reads back only what its own copies wrote, so cp.async.wait_group alone orders a
// read after its copy; no barrier is needed inside the loop. The words keep the weights' L2
// evict-first policy (cu/weight_loads.cuh).
#pragma once

#include <stdint.h>

namespace memra_cu {

// Bytes (16, 8 or 4) from src into the shared address `to`, both that aligned, with the L2
// policy. 16-byte copies bypass L1 (.cg); the smaller sizes exist only in the L1-allocating form.
template <int kBytes>
__device__ __forceinline__ void CopyWeightsToShared(uint32_t to, const void* src, uint64_t policy) {
  static_assert(kBytes == 16 || kBytes == 8 || kBytes == 4, "cp.async copies 16, 8 or 4 bytes");
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(to), "l"(src), "l"(policy)
                 : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global.L2::cache_hint [%0], [%1], %2, %3;" ::"r"(to), "l"(src), "n"(kBytes),
                 "l"(policy)
                 : "memory");
  }
}

// The copies issued since the last commit are one group (an empty group is a group).
__device__ __forceinline__ void CommitCopyGroup() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Every group but the newest kPending has landed, and this thread sees what it wrote.
template <int kPending>
__device__ __forceinline__ void WaitCopyGroups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

}  // namespace memra_cu
