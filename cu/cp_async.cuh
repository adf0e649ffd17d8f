// Copies from global into shared memory that no register carries (cp.async, sm_80 and later):
// a thread issues all of its 16-byte copies back to back and waits once, so staging a tile is one
// round trip to memory however many rows it has. A loop of loads each followed by its shared
// store leaves that to the compiler, which need not keep the loads ahead of the stores.
//
// The .cg form reads through L2 only, never L1: what it stages is the step's own data (the
// cache, the queries, the tile partials), the contract cu/pdl.cuh's LoadFresh keeps.
#pragma once

#include <stdint.h>

namespace memra_cu {

// dst (shared) and src (global) 16-byte aligned.
__device__ __forceinline__ void CopyToShared16(void* dst, const void* src) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(src) : "memory");
}

// This thread's copies have landed; a barrier after it shows them to the block.
__device__ __forceinline__ void WaitCopiesToShared() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Weights, for a pipeline of copies (cu/gemv_tile.cuh's ring): kBytes (16, 8 or 4) from src into
// the shared address `to`, both that aligned, with an L2 policy (cu/weight_loads.cuh). The .cg form
// has only 16 bytes; the smaller sizes take the L1-allocating .ca, which is harmless for weights.
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
