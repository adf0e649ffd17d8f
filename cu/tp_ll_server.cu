// The LL server: a persistent grid that runs eager LL joins handed to it through a stream memory
// operation instead of a launch each (why, and the host's half of the protocol: cu/tp_ll_server.h
// and addon/ll_server.cpp).
//
// Block 0 dispatches: it waits until every block finished the job before (so no block ever runs
// ahead into the next job: the arrival count below then needs no per-job slots), then until the
// walk stream has released the next one (ctl->cmd), copies the job into device memory and posts
// it as the ticket. Every block then
// reads that copy and runs its chunk with the launched kernel's
// protocol (cu/tp_ll_chunks.cuh). The block that completes a job's count publishes ctl->done,
// which the walk stream waits on.
//
// The other blocks never read ctl->cmd, only the ticket: a block that read cmd directly could see
// a job released to the NEXT generation after block 0 decided to stop, and run it twice.
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cu/kernels.h"
#include "cu/tp_ll_chunks.cuh"
#include "cu/tp_ll_server.h"

#ifdef MEMRA_LL_SERVER_TRACE
// Probe builds only (scripts/probes/ll-server-timing.cu): per job (mod 64), per block, when
// thread 0 got the ticket, read the job, ended its chunks and arrived.
__device__ unsigned long long g_llServerTrace[64][MEMRA_LL_SERVER_BLOCKS][4];
#define LL_TRACE(k, phase) (g_llServerTrace[(k) % 64][blockIdx.x][phase] = GlobalTimerNs())
#else
#define LL_TRACE(k, phase) ((void)0)
#endif

namespace {

static_assert(sizeof(LlJob) <= MEMRA_LL_SERVER_SLOT_BYTES, "an LL job must fit a server slot");
static_assert(sizeof(LlJob) % 4 == 0, "jobs are copied as 32-bit words");
static_assert(MEMRA_LL_SERVER_BLOCKS * kChunkLines * 2 <= kLlMaxValues, "server jobs are LL joins");
// Both compilation passes see one layout (a mismatch would fail one of them).
static_assert(offsetof(MemraLlServerHost, slots) == 384 && sizeof(MemraLlServerCtl) == 640, "server layout");
static_assert(offsetof(LlJob, stamp) == 120 && sizeof(LlJob) == 128, "LL job layout");

// The ticket passes on what block 0 acquired from the walk stream's release (cmd): stored with
// release and read with acquire, so a block that sees the ticket sees every store the stream's
// earlier work made (the job's inputs, epochs the launched kernel advanced).
__device__ __forceinline__ unsigned LoadAcquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreRelease(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Block 0, thread 0: the next job's seq once it may run, or false to stop (this generation's
// exit is then posted for the other blocks). `t` is when the walk stream's release was seen.
__device__ bool Dispatch(MemraLlServerCtl* ctl, MemraLlServerHost* host, unsigned next, unsigned gen,
                         unsigned long long idleNs, unsigned long long& t) {
  while (!Reached(LoadAcquire(&ctl->done), next - 1)) {
  }
  unsigned long long idleSince = GlobalTimerNs();
  for (;;) {
    if (Reached(LoadAcquire(&ctl->cmd), next)) {
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
    if (Reached(LoadAcquire(&ctl->ticket), next)) return true;
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

__global__ void __launch_bounds__(kLlThreads) ll_serve(MemraLlServerCtl* ctl, MemraLlServerHost* host,
                                                       unsigned gen, unsigned long long idleNs) {
  // The job is copied in as words and read as an LlJob: a union, not a cast, so the compiler
  // knows the two views share their bytes.
  __shared__ union {
    LlJob job;
    unsigned words[sizeof(LlJob) / 4];
  } in;
  const LlJob& job = in.job;
  __shared__ unsigned k;
  __shared__ bool run;
  __shared__ unsigned long long released;
  unsigned next = LoadVolatile(&ctl->done) + 1;  // the grid before this one ended with done final
  for (;;) {
    if (threadIdx.x == 0) {
      run = blockIdx.x == 0 ? Dispatch(ctl, host, next, gen, idleNs, released) : AwaitTicket(ctl, next, gen);
      k = next;
    }
    __syncthreads();
    if (!run) return;
    if (threadIdx.x == 0) LL_TRACE(next, 0);
    // Thread 0 acquired the walk stream's release (block 0) or the ticket; the barrier and this
    // fence extend that to every thread of the block before any of them reads the job's inputs.
    __threadfence();
    // Block 0 alone reads the job from mapped host memory and hands it on in device memory: when
    // all sixteen blocks read the slot over PCIe, the reads were served one after another, about
    // 1 us each, and a job took 17 us (scripts/probes/ll-server-timing.cu, call 35). ctl->job is
    // rewritten only after every block finished the job before (Dispatch waits for its `done`),
    // so no block can still be reading it.
    constexpr unsigned kJobWords = sizeof(LlJob) / 4;
    if (blockIdx.x == 0) {
      const unsigned* slot = reinterpret_cast<const unsigned*>(host->slots[k % MEMRA_LL_SERVER_SLOTS]);
      if (threadIdx.x < kJobWords) {
        in.words[threadIdx.x] = reinterpret_cast<const volatile unsigned*>(slot)[threadIdx.x];
        StoreVolatile(&ctl->job[threadIdx.x], in.words[threadIdx.x]);
      }
      __syncthreads();
      // The job's words before the ticket: the fence orders this block's stores, the release
      // publishes them to any block that acquires the ticket.
      if (threadIdx.x == 0) {
        __threadfence();
        StoreRelease(&ctl->ticket, k);
      }
    } else if (threadIdx.x < kJobWords) {
      in.words[threadIdx.x] = LoadVolatile(&ctl->job[threadIdx.x]);
    }
    __syncthreads();
    if (threadIdx.x == 0) LL_TRACE(k, 1);
    if (job.stamp != nullptr && blockIdx.x == 0 && threadIdx.x == 0) job.stamp[0] = released;
    // A refused wait wrote its refusal word and the job still counts as done, so the walk stream
    // never waits on a job that will not finish: as after a refused launch, the host reads the
    // word and resets the link, and until then every job is bounded by the spin limit.
    const bool ok = LlChunks(job, blockIdx.x, MEMRA_LL_SERVER_BLOCKS);
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

extern "C" cudaError_t memra_tp_ll_server_job(int reduce, uint64_t rows, uint64_t row_len,
                                              const float* send_src, const float* local_src,
                                              float* local_dst, float* recv_dst, uint64_t dst_stride,
                                              void* self_recv, void* peer_recv, uint64_t cap,
                                              void* self_state, void* peer_state, int rank, int* err,
                                              long long spin_limit, unsigned long long* stamp, void* slot) {
  LlJob j;
  if (!memra_tp_ll_server_fits(rows, row_len) ||
      !MakeLlJob(reduce, rows, row_len, send_src, local_src, local_dst, recv_dst, dst_stride, self_recv,
                 peer_recv, cap, self_state, peer_state, rank, err, spin_limit, stamp, &j)) {
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
  ll_serve<<<MEMRA_LL_SERVER_BLOCKS, kLlThreads, 0, stream>>>(ctl, host, gen, idle_ns);
  return cudaGetLastError();
}

#ifdef MEMRA_LL_SERVER_TRACE
extern "C" cudaError_t memra_tp_ll_server_trace(unsigned long long* out) {
  return cudaMemcpyFromSymbol(out, g_llServerTrace, sizeof g_llServerTrace);
}
#endif
