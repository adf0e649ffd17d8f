// Programmatic dependent launch (PDL) between the model kernels of one stream.
//
// A decode step is a chain of kernels, each short, most of them streaming weights. Without PDL a
// kernel's blocks start only once the previous kernel has finished and flushed, so every boundary
// costs a launch latency plus the ramp of the new grid, with the SMs that finished early idle.
// With it, the next grid may be scheduled as soon as every block of the running one has called
// PdlLaunchDependents() (or exited), and its blocks fill SMs as they free up. They may read what
// no kernel of the step writes (the weights) at once; everything else waits in PdlWait(), which
// returns once the previous grid has completed and its memory is visible. So:
//   - every model kernel calls PdlWait() before its first read of an activation, a position, a
//     token or the cache (but for the cases below), and before its first store of any kind
//     (a store before it could land under a previous kernel still reading that buffer);
//   - weights may be loaded before it: nothing writes them while steps run (memra_gen_weights
//     runs between steps, and the worker never marks the launch after it as dependent);
//   - a prefetch into L2 may be issued before it, even from a position read early (the attention's
//     cache rows, cu/mla_parts.cuh PrefetchRows): it puts nothing in a register, and L2 is where
//     every store lands, so a stale hint costs bytes, never a value;
//   - the attention stages cache rows into shared memory before it (cu/model_attention.cu
//     mla_tiles, cu/model_attention_short.cu mla_short): every row but the position's newest was
//     written by an earlier step, and the position it read early is read again after the wait,
//     the rows staged again (mla_tiles) or read from L2 (mla_short) if it moved;
//   - the tiled attention's combine (mla_combine) reads the row's position before it: the tile
//     kernel ahead lets it start only once its own wait has returned, and a wait returns only once
//     every kernel before it is complete, whichever of them set the positions.
//
// The products (cu/gemv_tile.cuh) and the short attention (cu/model_attention_short.cu) let the
// next kernel launch (PdlLaunchDependents) first thing, before their own wait, so its blocks are
// resident and loading their weights as early as SMs free up: for the short attention, one H200,
// `npm run bench -- roofline` against it waiting first, the step graph at t = 1 4.44 -> 4.39 ms,
// t = 2 6.42 -> 6.37. That is safe because every kernel waits before it reads or stores what the
// step writes: a kernel's wait returns once the one before has completed, which that one did only
// after its own wait (in at least one block: expert_down's blocks without a group leave before
// it), so the whole chain before it is complete too. The other kernels wait first. expert_up
// must, because of what the kernels after it read before their wait: expert_down reads the router's
// ids there, two kernels back (cu/model_experts.cu), and moe_combine_norm the router's weights and
// ids and the residual's h, three or more back (cu/model_moe.cu): each starts only once the kernel
// ahead has started, and so on back to expert_up, which let its successor start only after its own
// wait. The rest were measured: rmsnorm and route_quant launching early made the step at position
// 4000 5.46 -> 6.10 ms (t = 1 4.44 -> 4.38), the tiled attention's two kernels made position
// 1024 5.29 -> 6.04. moe_combine_norm launching early, measured alone, moved no case by more than
// 0.3% (docs/performance.md), so it keeps waiting first.
//
// One kernel does not wait for the grid ahead: expert_down at t > 2 waits for its group's blocks
// of expert_up through the experts' sync words (cu/model_experts.cu), so its blocks fill the SMs
// expert_up's last wave leaves. The chain stays whole: it starts only once every block of
// expert_up has returned from its own wait, and it completes only once every group it reads has
// been stored, so what its successor's wait implies is what a grid wait would have, but for
// expert_up's blocks of empty groups, which store nothing.
//
// Both instructions are no-ops in a kernel launched without the attribute, so the same kernels
// serve the eager walk, the captured step graph and the probes.
#pragma once

#include <cuda_runtime_api.h>

#include "cu/trace.cuh"

namespace memra_cu {

__device__ __forceinline__ void PdlWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  MEMRA_TRACE_WAITED();
}

// A value some earlier kernel of the step wrote (an activation, a position, a token, the cache,
// the router's ids): read from L2, never through the read-only path or L1. With PDL this kernel's
// blocks may be resident before that kernel has finished, so the non-coherent path's contract (data
// read-only for the kernel's whole lifetime) does not hold, and an SM's L1 may keep a line from
// before the write; every store reaches L2, which PdlWait() makes the writes visible in. Seen: the
// walk's hidden state wrong at some steps (NaN at others) with PDL on and __ldg loads of x, right
// with PDL off. Weights keep __ldg: nothing writes them while steps run.
template <class T>
__device__ __forceinline__ T LoadFresh(const T* p) {
  return __ldcg(p);
}

// LoadFresh of p where `on`, zeros elsewhere, as one predicated load: no branch for a load to wait
// on, and no request at all where it is off (re-reading another address instead costs an L2 trip).
__device__ __forceinline__ float4 LoadFreshIf(bool on, const float4* p) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  asm volatile(
      "{\n\t.reg .pred on;\n\tsetp.ne.u32 on, %4, 0;\n\t@on ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%5];\n\t}"
      : "+f"(v.x), "+f"(v.y), "+f"(v.z), "+f"(v.w)
      : "r"(unsigned(on)), "l"(p));
  return v;
}

__device__ __forceinline__ void PdlLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether the model launchers called next on this thread mark their launch dependent on the
// previous kernel of the stream (memra_model_set_pdl, cu/model.h).
bool PdlRequested();

// cudaLaunchKernelEx with the attributes the model kernels take: the cluster shape (x blocks a
// cluster, 1 for none) and, when PdlRequested(), programmatic stream serialization.
template <class Kernel, class... Args>
cudaError_t LaunchModelKernel(Kernel kernel, dim3 grid, dim3 block, size_t smem, unsigned clusterX,
                              cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (clusterX > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = clusterX;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (PdlRequested()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, args...);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return err;
  }
  return cudaGetLastError();
}

}  // namespace memra_cu
