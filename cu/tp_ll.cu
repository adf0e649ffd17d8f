// The LL join as one launch per rank and join (the protocol: cu/tp_ll_chunks.cuh). Graph
// capture always takes this path; eagerly the addon may hand small joins to the persistent server
// instead (cu/tp_ll_server.cu), which costs the host a stream memory operation, not a launch.
#include <stdint.h>

#include "cu/kernels.h"
#include "cu/prefetch_l2.cuh"
#include "cu/tp_ll_chunks.cuh"

namespace {

using memra_cu::PrefetchL2;

__global__ void __launch_bounds__(kLlThreads) ll_exchange(LlJob j) {
#ifdef MEMRA_LL_PHASE_TRACE
  const unsigned long long arrive = GlobalTimerNs();  // resident, not yet released (PDL)
#endif
  // Programmatic dependent launch (see memra_tp_ll_exchange): this grid may be resident before
  // the kernel ahead of it on the stream has finished. Nothing here may be READ before that
  // kernel's writes are visible (epochs, and inputs it may have produced), so the loads wait;
  // once past the wait, let the next kernel on the stream be scheduled in turn.
  //
  // The lines the first chunk reads right after the wait are prefetched to L2 before it, while
  // the grid sits resident waiting for its release: a prefetch reads nothing into a register, so
  // it cannot see a value too early. Only this rank's own input lines and state: a prefetch of
  // the peer's slots would fight the peer's polls (docs/performance.md, "The LL kernel's shape").
  {
    const unsigned c = blockIdx.x, line = c * kChunkLines + threadIdx.x;
    PrefetchL2(&j.self->epoch[c]);
    PrefetchL2(&j.self->ack[c]);
    if (line < (j.rows * j.rowLen + 1) / 2) {
      if (j.sendSrc != nullptr) PrefetchL2(j.sendSrc + 2 * line);
      if (j.localSrc != nullptr && j.localSrc != j.sendSrc) PrefetchL2(j.localSrc + 2 * line);
    }
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
#ifdef MEMRA_LL_PHASE_TRACE
  const unsigned long long released = GlobalTimerNs();
#endif
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (j.stamp != nullptr && blockIdx.x == 0 && threadIdx.x == 0) j.stamp[0] = GlobalTimerNs();
#ifdef MEMRA_LL_PHASE_TRACE
  if (threadIdx.x == 0) {
    s_llStart[0] = arrive;
    s_llStart[1] = released;
  }
#endif

  if (!LlChunks<false>(j, blockIdx.x, gridDim.x)) return;
  if (j.stamp != nullptr && threadIdx.x == 0) atomicMax(&j.stamp[1], GlobalTimerNs());
}

}  // namespace

extern "C" size_t memra_tp_ll_state_bytes(void) { return sizeof(LlState); }
extern "C" unsigned memra_tp_ll_depth(void) { return kLlDepth; }
extern "C" uint64_t memra_tp_ll_max_values(void) { return kLlMaxValues; }

extern "C" cudaError_t memra_tp_ll_exchange(const MemraLlJobArgs* job, int pdl, unsigned max_blocks,
                                            cudaStream_t stream) {
  LlJob j;
  if (job == nullptr || !MakeLlJob(*job, &j)) return cudaErrorInvalidValue;
  // Chunk c is block c % grid's, and each block takes its chunks in increasing order: with every
  // block of both grids resident, the lowest chunk not yet exchanged has both halves running, so
  // the two ranks' grids need not match.
  const uint64_t chunks = LlChunkCount(job->rows * job->row_len);
  const uint64_t most = max_blocks != 0 && max_blocks < kMaxGrid ? max_blocks : kMaxGrid;
  const unsigned blocks = static_cast<unsigned>(chunks < 1 ? 1 : chunks > most ? most : chunks);
  // Launched with programmatic stream serialization when `pdl`: the grid is scheduled while the
  // previous kernel finishes and waits on the device (griddepcontrol.wait) instead of behind the
  // stream's full kernel boundary. Callers ask for it only while capturing: eagerly the host's
  // launch is the join's bottleneck and the attribute adds to it (docs/performance.md). Without
  // it griddepcontrol.wait returns at once: the kernel is correct either way.
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kLlThreads);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, ll_exchange, j);
}

#ifdef MEMRA_LL_PHASE_TRACE
extern "C" cudaError_t memra_tp_ll_phase_trace(unsigned long long* out) {
  return cudaMemcpyFromSymbol(out, g_llPhase, sizeof g_llPhase);
}

extern "C" cudaError_t memra_tp_ll_phase_trace_reset(void) {
  void* p = nullptr;
  const cudaError_t e = cudaGetSymbolAddress(&p, g_llPhase);
  return e != cudaSuccess ? e : cudaMemset(p, 0, sizeof g_llPhase);
}
#endif
