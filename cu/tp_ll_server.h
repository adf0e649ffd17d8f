// The LL server's shared layout: what the addon (a worker thread) and the persistent kernel
// (cu/tp_ll_server.cu) both read and write. Plain C++, included by both sides.
//
// Why a server: launched eagerly, an LL join costs each worker one cudaLaunchKernelEx, 3.4 to
// 4.2 us on the two-H200 machine, and two workers launching at once slow each other to 4.7 to
// 5.4 us (scripts/probes/launch-probe.cu, 2026-11-30). A stream memory operation costs 1 us. So
// eagerly a join can be handed to a kernel that is already running: the worker writes the job
// into mapped host memory and enqueues one cuStreamBatchMemOp, "store cmd = seq" (after the
// stream's earlier work, with the fence that makes it visible). "Wait until done >= seq", so
// later work sees the join's results, is enqueued only when something other than a served join
// next uses the stream (addon/ll_server.h, SettleWait): it costs the stream ~6 us to resolve.
// The server runs the same chunk protocol as the launched kernel (cu/tp_ll_chunks.cuh). It needs
// CUDA's eager module loading (addon/module.cpp says why).
//
// Lifetime. A kernel that never ends would make every implicitly synchronizing call on its
// device (cudaFree, cudaDeviceSynchronize, NCCL's set-up) wait forever, so the server stops by
// itself once idle for `idle_ns` with nothing issued, and the next submit launches it again.
// Stopping races with a submit; the two decide through mapped host memory in the Dekker pattern
// (as the command ring's sleeping does): the host stores `issued`, fences, reads `state`; the
// server stores `state = Exiting`, fences, reads `issued`. At least one sees the other's store, so
// either the server sees the job and stays, or the host sees Exiting and waits for the outcome,
// relaunching if the server stopped. A new launch queues behind the old grid on the server's own
// stream, so two generations never run at once.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "cu/kernels.h"  // MemraLlJobArgs

// A server job is one block's chunk each: joins of more chunks are launched (both ranks decide
// alike from the size, so a join's two halves always take the same path).
#define MEMRA_LL_SERVER_BLOCKS 16u
#define MEMRA_LL_SERVER_SLOTS 256u  // jobs in flight; a power of two
#define MEMRA_LL_SERVER_SLOT_BYTES 128u

enum MemraLlServerState : uint32_t {
  kMemraLlServerStopped = 0,  // no grid running; the host launches one on its next submit
  kMemraLlServerRunning = 1,
  kMemraLlServerExiting = 2,  // deciding: the host waits for Running or Stopped
};

// Mapped pinned host memory, one per rank; each field on its own 128-byte line so the host's and
// the server's stores never share one.
struct MemraLlServerHost {
  alignas(128) volatile uint32_t issued;  // host: the newest job submitted (its seq)
  alignas(128) volatile uint32_t state;   // server (and the host, before it launches)
  alignas(128) volatile uint32_t done;    // server: the newest job finished (slot reuse)
  alignas(128) unsigned char slots[MEMRA_LL_SERVER_SLOTS][MEMRA_LL_SERVER_SLOT_BYTES];  // host
  // host: the seq whose job a slot holds, stored after the job's words, so the dispatcher can
  // read a job ahead of its release and know it is whole.
  alignas(128) volatile uint32_t slotSeq[MEMRA_LL_SERVER_SLOTS];
};

// Device memory, one per rank, zeroed before the first launch.
struct MemraLlServerCtl {
  alignas(128) uint32_t cmd;   // the walk stream's store: jobs released so far
  alignas(128) uint32_t done;  // the newest job every block finished (the walk stream waits on it)
  alignas(128) uint32_t ticket;   // the dispatcher's release of a job to the working blocks
  uint32_t exit_gen;              // the generation told to stop
  alignas(128) uint32_t arrived;  // blocks finished, all jobs together (BLOCKS per job)
  alignas(128) uint32_t job[MEMRA_LL_SERVER_SLOT_BYTES / 4];  // the dispatcher's copy of the job running
};

#ifdef __cplusplus
extern "C" {
#endif

// True when a join of rows x row_len values fits one server job.
int memra_tp_ll_server_fits(uint64_t rows, uint64_t row_len);

// Writes `job` into `slot` (MEMRA_LL_SERVER_SLOT_BYTES of host memory). cudaErrorInvalidValue
// where memra_tp_ll_exchange would refuse it, or when it does not fit a server job.
cudaError_t memra_tp_ll_server_job(const MemraLlJobArgs* job, void* slot);

// Launches generation `gen` (1, 2, ...) of the server on `stream`; it runs jobs from ctl->done + 1
// on and stops after `idle_ns` with nothing issued. `host` is the device's view of the mapped
// block.
cudaError_t memra_tp_ll_server_launch(MemraLlServerCtl* ctl, MemraLlServerHost* host,
                                      uint32_t gen, unsigned long long idle_ns,
                                      cudaStream_t stream);

#ifdef __cplusplus
}
#endif
