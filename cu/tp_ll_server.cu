// The LL server: a persistent grid that runs eager LL joins handed to it through a stream memory
// operation instead of a launch each (why, and the host's half of the protocol: cu/tp_ll_server.h
// and addon/ll_server.cpp).
//
// MEMRA_LL_SERVER_BLOCKS working blocks and one dispatcher block. The dispatcher reads job k + 1
// from mapped host memory while job k runs (PCIe reads cost ~1 us each, so they stay off the
// job's path), waits until every working block finished job k (so no block ever runs ahead into
// the next job: the arrival count below then needs no per-job slots) and until the walk stream
// has released job k + 1 (ctl->cmd), copies the job into device memory and posts it as the
// ticket. Every working block reads that copy and runs its chunks with the launched kernel's
// protocol (cu/tp_ll_chunks.cuh). The block that completes a job's count publishes ctl->done,
// which the walk stream waits on before anything but another served join.
//
// Why one reader of host memory: when all sixteen blocks read the job's slot over PCIe, the reads
// were served one after another, about 1 us each, and a job took 17 us; with the dispatcher's
// copy in device memory, 4.1 us (scripts/probes/ll-server-timing.cu).
//
// The working blocks never read ctl->cmd, only the ticket: a block that read cmd directly could
// see a job released to the NEXT generation after the dispatcher decided to stop, and run it
// twice.
#include <cuda/atomic>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cu/kernels.h"
#include "cu/tp_ll_chunks.cuh"
#include "cu/tp_ll_server.h"

#ifdef MEMRA_LL_SERVER_TRACE
// Probe builds only (scripts/probes/ll-server-timing.cu): per job (mod 64), per block, when
// thread 0 got the ticket, read the job, ended its chunks and arrived.
__device__ unsigned long long g_llServerTrace[64][MEMRA_LL_SERVER_BLOCKS + 1][4];
#define LL_TRACE(k, phase) (g_llServerTrace[(k) % 64][blockIdx.x][phase] = GlobalTimerNs())
#else
#define LL_TRACE(k, phase) ((void)0)
#endif

namespace {

static_assert(sizeof(LlJob) <= MEMRA_LL_SERVER_SLOT_BYTES, "an LL job must fit a server slot");
static_assert(sizeof(LlJob) % 4 == 0, "jobs are copied as 32-bit words");
static_assert(MEMRA_LL_SERVER_BLOCKS * kChunkLines * 2 <= kLlMaxValues, "server jobs are LL joins");
// Both compilation passes see one layout (a mismatch would fail one of them).
static_assert(offsetof(MemraLlServerHost, slots) == 384 &&
                  offsetof(MemraLlServerHost, slotSeq) ==
                      384 + MEMRA_LL_SERVER_SLOTS * MEMRA_LL_SERVER_SLOT_BYTES &&
                  sizeof(MemraLlServerCtl) == 640,
              "server layout");
static_assert(offsetof(LlJob, stamp) == 120 && sizeof(LlJob) == 128, "LL job layout");

// The ticket passes on what the dispatcher acquired from the walk stream's release (cmd): stored with
// release and read with acquire, so a block that sees the ticket sees every store the stream's
// earlier work made (the job's inputs, epochs the launched kernel advanced). Device scope: the
// control block's readers and writers are this device's SMs and its streams' memory operations.
using DeviceFlag = cuda::atomic_ref<unsigned, cuda::thread_scope_device>;

__device__ __forceinline__ unsigned LoadAcquire(unsigned& flag) {
  return DeviceFlag(flag).load(cuda::memory_order_acquire);
}

// The dispatcher's lane 0: true once job `next` may run, false to stop (this generation's exit is
// then posted for the working blocks). `t` is when the walk stream's release was seen.
__device__ bool Dispatch(MemraLlServerCtl* ctl, MemraLlServerHost* host, unsigned next, unsigned gen,
                         unsigned long long idleNs, unsigned long long& t) {
  while (!Reached(LoadAcquire(ctl->done), next - 1)) {
  }
  unsigned long long idleSince = GlobalTimerNs();
  for (;;) {
    if (Reached(LoadAcquire(ctl->cmd), next)) {
      t = GlobalTimerNs();
      return true;  // the caller copies the job to device memory, then posts the ticket
    }
    const unsigned long long now = GlobalTimerNs();
    if (now - idleSince < idleNs) continue;
    // Idle: stop unless a job is issued that the stream has not released yet (the Dekker pair of
    // the host's submit, cu/tp_ll_server.h). The system fence puts Exiting in host memory before
    // `issued` is read; PCIe does not let that read pass the posted write either.
    host->state = kMemraLlServerExiting;
    __threadfence_system();
    if (!Reached(host->issued, next)) {
      StoreVolatile(&ctl->exit_gen, gen);
      __threadfence_system();
      host->state = kMemraLlServerStopped;
      return false;
    }
    host->state = kMemraLlServerRunning;
    idleSince = now;
  }
}

// Other blocks, thread 0: true once job `next` is posted, false once this generation stops.
__device__ bool AwaitTicket(MemraLlServerCtl* ctl, unsigned next, unsigned gen) {
  for (;;) {
    if (Reached(LoadAcquire(ctl->ticket), next)) return true;
    if (LoadVolatile(&ctl->exit_gen) == gen) return false;
  }
}

// Thread 0 of each block, after its chunk: count the block in, and if it completes job k,
// publish k. The fence puts this block's stores (results, epochs) before its count, so the last
// block's `done` covers every block's.
__device__ void Arrive(MemraLlServerCtl* ctl, MemraLlServerHost* host, unsigned k) {
  __threadfence();
  const unsigned prev = atomicAdd(&ctl->arrived, 1u);
  if (prev + 1 != k * MEMRA_LL_SERVER_BLOCKS) return;
  __threadfence();
  StoreVolatile(&ctl->done, k);
  host->done = k;
}

constexpr unsigned kJobWords = sizeof(LlJob) / 4;

// The dispatcher block's first warp (the other warps leave at once). Lane i holds word i of the
// job it dispatches next.
__device__ void DispatchLoop(MemraLlServerCtl* ctl, MemraLlServerHost* host, unsigned gen,
                             unsigned long long idleNs) {
  const unsigned lane = threadIdx.x;
  unsigned next = LoadVolatile(&ctl->done) + 1;  // the grid before this one ended with done final
  for (;;) {
    const volatile unsigned* slot =
        reinterpret_cast<const volatile unsigned*>(host->slots[next % MEMRA_LL_SERVER_SLOTS]);
    // Ahead of its release: the slot's seq first, then its words, which the host stored before
    // the seq (x86 keeps the order, and these reads are issued only once the seq has returned).
    bool have = __shfl_sync(0xffffffffu, lane == 0 ? host->slotSeq[next % MEMRA_LL_SERVER_SLOTS] : 0u, 0) == next;
    unsigned word = have && lane < kJobWords ? slot[lane] : 0u;
    unsigned long long released = 0;
    bool run = false;
    if (lane == 0) run = Dispatch(ctl, host, next, gen, idleNs, released);
    run = __shfl_sync(0xffffffffu, run, 0);
    if (!run) return;
    // Not read ahead: the host wrote it before the stream's release, which has now been seen.
    if (!have && lane < kJobWords) word = slot[lane];
    if (lane < kJobWords) StoreVolatile(&ctl->job[lane], word);
    // The job's stamp pointer is its last two words (static_assert above): the dispatcher stores
    // the release time, as block 0 of a launched join does when the stream reaches it.
    const unsigned lo = __shfl_sync(0xffffffffu, word, kJobWords - 2);
    const unsigned hi = __shfl_sync(0xffffffffu, word, kJobWords - 1);
    unsigned long long* stamp = reinterpret_cast<unsigned long long*>((uint64_t(hi) << 32) | lo);
    if (lane == 0 && stamp != nullptr) stamp[0] = released;
    // The job's words before the ticket: each lane's fence orders its own store, the warp's
    // barrier gathers them, and the release publishes them to whoever acquires the ticket.
    __threadfence();
    __syncwarp();
    if (lane == 0) {
      LL_TRACE(next, 0);
      DeviceFlag(ctl->ticket).store(next, cuda::memory_order_release);
    }
    next++;
  }
}

__global__ void __launch_bounds__(kLlThreads) ll_serve(MemraLlServerCtl* ctl, MemraLlServerHost* host,
                                                       unsigned gen, unsigned long long idleNs) {
  if (blockIdx.x == MEMRA_LL_SERVER_BLOCKS) {
    if (threadIdx.x < 32) DispatchLoop(ctl, host, gen, idleNs);
    return;
  }
  // The job is copied in as words and read as an LlJob: a union, not a cast, so the compiler
  // knows the two views share their bytes.
  __shared__ union {
    LlJob job;
    unsigned words[kJobWords];
  } in;
  const LlJob& job = in.job;
  __shared__ unsigned k;
  __shared__ bool run;
  unsigned next = LoadVolatile(&ctl->done) + 1;
  for (;;) {
    if (threadIdx.x == 0) {
      run = AwaitTicket(ctl, next, gen);
      k = next;
    }
    __syncthreads();
    if (!run) return;
    if (threadIdx.x == 0) LL_TRACE(k, 0);
    // Thread 0 acquired the ticket; the barrier and this fence extend that to every thread of the
    // block before any of them reads the job or its inputs.
    __threadfence();
    if (threadIdx.x < kJobWords) in.words[threadIdx.x] = LoadVolatile(&ctl->job[threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) LL_TRACE(k, 1);
    // A refused wait wrote its refusal word and the job still counts as done, so the walk stream
    // never waits on a job that will not finish: as after a refused launch, the host reads the
    // word and resets the link, and until then every job is bounded by the spin limit.
    const bool ok = LlChunks<true>(job, blockIdx.x, MEMRA_LL_SERVER_BLOCKS);
    if (threadIdx.x == 0) {
      LL_TRACE(k, 2);
      if (ok && job.stamp != nullptr) atomicMax(&job.stamp[1], GlobalTimerNs());
      Arrive(ctl, host, k);
      LL_TRACE(k, 3);
    }
    next = k + 1;
    __syncthreads();  // `job` and `k` are rewritten next round only after every thread read them
  }
}

}  // namespace

extern "C" int memra_tp_ll_server_fits(uint64_t rows, uint64_t row_len) {
  const uint64_t total = rows * row_len;
  return total <= kLlMaxValues && LlChunkCount(total) <= MEMRA_LL_SERVER_BLOCKS ? 1 : 0;
}

extern "C" cudaError_t memra_tp_ll_server_job(const MemraLlJobArgs* job, void* slot) {
  LlJob j;
  if (job == nullptr || !memra_tp_ll_server_fits(job->rows, job->row_len) || !MakeLlJob(*job, &j)) {
    return cudaErrorInvalidValue;
  }
  // The job's bytes as words through memcpy: reading `j` through an unsigned* instead broke the
  // aliasing rule, and at -O2 the compiler dropped the stores that built `j` (the grid read stack
  // garbage as the job's stamp, 2026-11-30, scripts/probes/ll-server-probe.cu). Then word by word
  // through a volatile pointer: the compiler must not defer or merge these stores past the
  // host's release of `issued`.
  unsigned words[sizeof j / 4];
  memcpy(words, &j, sizeof j);
  volatile unsigned* to = static_cast<volatile unsigned*>(slot);
  for (size_t i = 0; i < sizeof j / 4; i++) to[i] = words[i];
  return cudaSuccess;
}

extern "C" cudaError_t memra_tp_ll_server_launch(MemraLlServerCtl* ctl, MemraLlServerHost* host,
                                                 uint32_t gen, unsigned long long idle_ns,
                                                 cudaStream_t stream) {
  ll_serve<<<MEMRA_LL_SERVER_BLOCKS + 1, kLlThreads, 0, stream>>>(ctl, host, gen, idle_ns);
  return cudaGetLastError();
}

#ifdef MEMRA_LL_SERVER_TRACE
extern "C" cudaError_t memra_tp_ll_server_trace(unsigned long long* out) {
  return cudaMemcpyFromSymbol(out, g_llServerTrace, sizeof g_llServerTrace);
}
#endif
