// Weight loads that ask L2 to drop their lines first. A decode step reads each weight once (at
// `bench` about 15 GB a step through the card's 50 MB of L2), so no weight line is read again
// before the next step has pushed it out anyway; at L2's normal priority that stream instead
// pushes out what the step does read again within microseconds: the activations the next kernel
// reads, the cache rows and, likely, the kernels' own code (an instruction fetch that misses L2
// waits on HBM behind the weights). The values are the same as __ldg's: only the eviction order
// changes.
//
// Found with the chain probe (scripts/probes/step-timeline-probe.cu, five alternating rounds on
// one H200): the step at t = 1 4.077-4.082 -> 3.959-3.965 ms, position 4000 4.833-4.840 ->
// 4.679-4.692, t = 8 11.739-11.768 -> 11.542-11.569. In its traced timeline the time came off the
// latency-bound kernels and the releases between kernels (the merge's launch 8.8 -> 7.8 us a
// layer, the router's norm and product 5.5 -> 4.9), not off the products' own streaming.
#pragma once

#include <stdint.h>

namespace memra_cu {

// Every line these loads bring into L2 is first in line for eviction.
__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// L2's normal priority, for the few weights that several blocks of a launch read (the short
// attention's late Wuv rows, cu/model_attention_short.cu).
__device__ __forceinline__ uint64_t EvictNormalPolicy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// Read-only loads through the non-coherent path, as __ldg, with the policy's eviction hint. The
// asm is volatile so that a load stays under the guard its caller wrote around it: without it
// the compiler took the statement for a pure function of its operands and hoisted some of the
// expert kernels' 2-byte loads (a clipped thread's columns past n) out of their guards, and the
// GPU suite's sharded walk at `small`, t = 4, stopped on an illegal address.
__device__ __forceinline__ uint4 LoadWeights(const uint4* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ uint2 LoadWeights(const uint2* p, uint64_t policy) {
  uint2 v;
  asm volatile("ld.global.nc.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(v.x), "=r"(v.y) : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ uint32_t LoadWeights(const uint32_t* p, uint64_t policy) {
  uint32_t v;
  asm volatile("ld.global.nc.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ uint16_t LoadWeights(const uint16_t* p, uint64_t policy) {
  uint16_t v;
  asm volatile("ld.global.nc.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(policy));
  return v;
}

}  // namespace memra_cu
