// A hint that the line holding p will be read soon, into L2 only. L2 is where every SM's view of
// device memory meets, so a line brought there early cannot make a later load return an older
// value; a prefetch into L1 could (this SM's L1 is not kept coherent with other SMs' stores). It
// puts nothing in a register, so a kernel may issue it before its PdlWait (cu/pdl.cuh).
#pragma once

namespace memra_cu {

__device__ __forceinline__ void PrefetchL2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// The same for `bytes` contiguous bytes from p in one instruction (the copy engine's bulk
// prefetch): p 16-byte aligned, bytes a multiple of 16.
__device__ __forceinline__ void PrefetchL2Bulk(const void* p, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}

}  // namespace memra_cu
