// The device clock for the join profile (src/decode/join-profile.ts): one thread stores
// %globaltimer (nanoseconds, 32 ns steps on H200: scripts/probes/timing-probe.cu) once the work
// ahead of it on the stream is done. It places self-timed joins (cu/tp_ll.cu) on the rank's
// timeline, where a timing event would cost the stream 3.5 us (the same probe).
#include "cu/globaltimer.cuh"
#include "cu/kernels.h"

namespace {

__global__ void stamp_now(unsigned long long* dst) { *dst = GlobalTimerNs(); }

}  // namespace

extern "C" cudaError_t memra_launch_stamp_now(unsigned long long* dst, cudaStream_t stream) {
  stamp_now<<<1, 1, 0, stream>>>(dst);
  return cudaGetLastError();
}
