// Blocks of a cluster may store into each other's shared memory only once every one of them has
// started (the CUDA programming guide's rule for distributed shared memory). A kernel that pushes
// values into the other blocks' shared memory, instead of having each block read the others' after
// a meeting and meet again so that none leaves while another still reads it, has each thread
// arrive on the cluster barrier first thing and wait on it just before its first such store.
// Relaxed: the arrival orders nothing, and by the time the values are ready every block has long
// arrived, so the wait costs nothing. Once a kernel: the barrier's arrivals and waits alternate,
// and the kernel's next meeting (a cluster sync) is a pair of its own.
#pragma once

#include <stdint.h>

#include <cooperative_groups.h>

namespace memra_cu {

__device__ __forceinline__ void ClusterArriveStarted() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

__device__ __forceinline__ void ClusterWaitStarted() { asm volatile("barrier.cluster.wait.aligned;" ::: "memory"); }

// v into local[at] of each of the cluster's kBlocks blocks (this one's too), after
// ClusterWaitStarted; the cluster's next meeting makes the stores visible.
template <unsigned kBlocks>
__device__ __forceinline__ void StoreToEveryBlock(float* local, uint32_t at, float v) {
  const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
#pragma unroll
  for (unsigned r = 0; r < kBlocks; ++r) cluster.map_shared_rank(local, r)[at] = v;
}

}  // namespace memra_cu
