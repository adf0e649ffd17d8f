// Copies from global into shared memory that no register carries (cp.async, sm_80 and later):
// a thread issues all of its 16-byte copies back to back and waits once, so staging a tile is one
// round trip to memory however many rows it has. A loop of loads each followed by its shared
// store leaves that to the compiler, which need not keep the loads ahead of the stores.
//
// The .cg form reads through L2 only, never L1: what it stages is the step's own data (the
// cache, the queries, the tile partials), the contract cu/pdl.cuh's LoadFresh keeps.
#pragma once

namespace memra_cu {

// dst (shared) and src (global) 16-byte aligned.
__device__ __forceinline__ void CopyToShared16(void* dst, const void* src) {
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(to), "l"(src) : "memory");
}

// This thread's copies have landed; a barrier after it shows them to the block.
__device__ __forceinline__ void WaitCopiesToShared() { asm volatile("cp.async.wait_all;" ::: "memory"); }

}  // namespace memra_cu
