#include "addon/ll_server.h"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <atomic>
#include <cstddef>
#include <chrono>
#include <cstring>
#include <string>

#include "addon/errors.h"

namespace memra {

namespace {

using Clock = std::chrono::steady_clock;

// How long the host waits on the grid (a slot still in use, a stop being decided, the grid
// stopping at teardown) before it gives up with an error: far above anything a healthy device
// takes, and bounded, so a stuck GPU is reported instead of hanging the worker.
constexpr auto kWaitLimit = std::chrono::seconds(10);

// A driver entry point, resolved through the runtime: the addon links only the static runtime,
// never libcuda, so that it still loads where no driver is installed. cudaErrorSymbolNotFound
// where the driver lacks it.
template <typename F>
cudaError_t DriverEntry(const char* name, F* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
  if (e == cudaSuccess && (q != cudaDriverEntryPointSuccess || p == nullptr)) e = cudaErrorSymbolNotFound;
  *fn = e == cudaSuccess ? reinterpret_cast<F>(p) : nullptr;
  return e;
}

// cuStreamBatchMemOp, resolved once; what resolving it returned.
cudaError_t ResolveBatchMemOp(PFN_cuStreamBatchMemOp_v11070* fn) {
  static PFN_cuStreamBatchMemOp_v11070 batch = nullptr;
  static const cudaError_t resolved = DriverEntry("cuStreamBatchMemOp", &batch);
  *fn = batch;
  return resolved;
}

// One 32-bit stream memory operation on `s`: the server's release (a write) and the walk
// stream's wait (a wait) are both one, and the driver lays out writeValue and waitValue alike.
// CUDA_ERROR_NOT_FOUND where the driver has no cuStreamBatchMemOp.
CUresult EnqueueMemOp(cudaStream_t s, CUstreamBatchMemOpType operation, const uint32_t* address,
                      uint32_t value, unsigned flags) {
  PFN_cuStreamBatchMemOp_v11070 batch;
  if (ResolveBatchMemOp(&batch) != cudaSuccess) return CUDA_ERROR_NOT_FOUND;
  CUstreamBatchMemOpParams op;
  std::memset(&op, 0, sizeof op);
  op.writeValue.operation = operation;
  op.writeValue.address = reinterpret_cast<CUdeviceptr>(address);
  op.writeValue.value = value;
  op.writeValue.flags = flags;
  return batch(reinterpret_cast<CUstream>(s), 1, &op, 0);
}
static_assert(offsetof(CUstreamBatchMemOpParams, writeValue.address) ==
                      offsetof(CUstreamBatchMemOpParams, waitValue.address) &&
                  offsetof(CUstreamBatchMemOpParams, writeValue.value) ==
                      offsetof(CUstreamBatchMemOpParams, waitValue.value) &&
                  offsetof(CUstreamBatchMemOpParams, writeValue.flags) ==
                      offsetof(CUstreamBatchMemOpParams, waitValue.flags),
              "a write and a wait share one layout");

// Spins until `done()` or kWaitLimit has passed; false on the limit.
template <typename Done>
bool SpinBounded(Done done) {
  const auto deadline = Clock::now() + kWaitLimit;
  while (!done()) {
    if (Clock::now() > deadline) return false;
  }
  return true;
}

bool Before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

}  // namespace

void RequireEagerModuleLoading(Napi::Env env) {
  // A resident grid and lazy kernel loading deadlock (addon/module.cpp): refuse instead.
  static PFN_cuModuleGetLoadingMode_v11070 loadingMode = nullptr;
  static const cudaError_t resolved = DriverEntry("cuModuleGetLoadingMode", &loadingMode);
  CUmoduleLoadingMode mode = CU_MODULE_LAZY_LOADING;
  if (resolved != cudaSuccess || loadingMode(&mode) != CUDA_SUCCESS || mode != CU_MODULE_EAGER_LOADING) {
    ThrowError(env,
               "the LL server needs CUDA's eager module loading: with lazy loading the first launch "
               "of a kernel can wait for the server's grid, which never ends while joins come. "
               "Unset CUDA_MODULE_LOADING (memra then sets EAGER) or set it to EAGER, or open the "
               "link with serveIdleMicros 0 to launch every join",
               "MEMRA_LL_SERVER_LAZY_LOADING");
  }
}

std::unique_ptr<LlServer> LlServer::Create(Napi::Env env, int device) {
  PFN_cuStreamBatchMemOp_v11070 batch;
  const cudaError_t resolved = ResolveBatchMemOp(&batch);
  if (resolved != cudaSuccess) {
    ThrowCudaError(env, resolved,
                   "cudaGetDriverEntryPointByVersion(cuStreamBatchMemOp) for the LL server "
                   "(llConfigure with serveIdleMicros 0 launches every join instead)",
                   device);
  }
  // Eager module loading was checked by llConfigure, the only way to ask for a server.
  std::unique_ptr<LlServer> s(new LlServer(device));
  MEMRA_CUDA_CHECK(env, device, cudaMalloc(reinterpret_cast<void**>(&s->ctl_), sizeof(MemraLlServerCtl)),
                   "cudaMalloc(LL server control block)");
  MEMRA_CUDA_CHECK(env, device,
                   cudaHostAlloc(reinterpret_cast<void**>(&s->host_), sizeof(MemraLlServerHost),
                                 cudaHostAllocMapped | cudaHostAllocPortable),
                   "cudaHostAlloc(LL server job slots, cudaHostAllocMapped)");
  std::memset(static_cast<void*>(s->host_), 0, sizeof(MemraLlServerHost));  // state: Stopped
  MEMRA_CUDA_CHECK(env, device,
                   cudaHostGetDevicePointer(reinterpret_cast<void**>(&s->hostOnDevice_), s->host_, 0),
                   "cudaHostGetDevicePointer(LL server job slots)");
  MEMRA_CUDA_CHECK(env, device, cudaStreamCreateWithFlags(&s->stream_, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags(LL server stream)");
  // Zeroed on the server's own stream and waited for: a memset on the legacy stream does not
  // order with a non-blocking stream, and the first grid must not read what was there before.
  MEMRA_CUDA_CHECK(env, device, cudaMemsetAsync(s->ctl_, 0, sizeof(MemraLlServerCtl), s->stream_),
                   "cudaMemsetAsync(LL server control block)");
  MEMRA_CUDA_CHECK(env, device, cudaStreamSynchronize(s->stream_), "cudaStreamSynchronize(LL server stream)");
  return s;
}

LlServer::~LlServer() {
  // Nothing may be freed under a running grid: it reads the slots and the control block. A grid
  // that does not stop in time (a job issued that its stream never released) is left its memory.
  const bool stopped = host_ == nullptr || stream_ == nullptr || SpinBounded([this] {
    return host_->state == kMemraLlServerStopped && cudaStreamQuery(stream_) == cudaSuccess;
  });
  (void)cudaGetLastError();  // cudaErrorNotReady from the queries is an answer, not a failure
  if (!stopped) return;
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  if (host_ != nullptr) (void)cudaFreeHost(host_);
  if (ctl_ != nullptr) (void)cudaFree(ctl_);
}

bool LlServer::ReadControl(MemraLlServerCtl* out, bool* gridRunning) const {
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return false;
  const bool ok = cudaMemcpyAsync(out, ctl_, sizeof *out, cudaMemcpyDeviceToHost, s) == cudaSuccess &&
                  cudaStreamSynchronize(s) == cudaSuccess;
  (void)cudaStreamDestroy(s);
  *gridRunning = cudaStreamQuery(stream_) == cudaErrorNotReady;
  (void)cudaGetLastError();
  return ok;
}

void LlServer::Withdraw(Napi::Env env, uint32_t seq, cudaError_t err, const std::string& call) {
  issued_ = seq - 1;
  host_->issued = issued_;
  if (err != cudaSuccess) ThrowCudaError(env, err, call, device_);
  ThrowError(env, call, "MEMRA_LL_SERVER");
}

void LlServer::EnsureRunning(Napi::Env env, uint32_t seq) {
  uint32_t state;
  if (!SpinBounded([&] { return (state = host_->state) != kMemraLlServerExiting; })) {
    Withdraw(env, seq, cudaSuccess,
             "launchLl: the LL server on device " + std::to_string(device_) +
                 " has been deciding whether to stop for 10 s: the GPU is not running it");
  }
  if (state == kMemraLlServerRunning) return;
  // Stopped. The new generation queues behind the old grid on stream_, so they never overlap.
  host_->state = kMemraLlServerRunning;
  const cudaError_t e = memra_tp_ll_server_launch(ctl_, hostOnDevice_, generation_ + 1, idleNs_, stream_);
  if (e != cudaSuccess) {
    host_->state = kMemraLlServerStopped;
    Withdraw(env, seq, e, "memra_tp_ll_server_launch(generation " + std::to_string(generation_ + 1) + ")");
  }
  generation_++;
  launches_++;
}

void LlServer::Submit(Napi::Env env, const MemraLlJobArgs& job, cudaStream_t walk) {
  const uint32_t seq = issued_ + 1;
  // The slot's previous job must be finished before its words are overwritten.
  const uint32_t previous = seq - MEMRA_LL_SERVER_SLOTS;
  if (!SpinBounded([&] { return !Before(host_->done, previous); })) {
    ThrowError(env,
               "launchLl: the LL server on device " + std::to_string(device_) + " has not finished job " +
                   std::to_string(previous) + " in 10 s (" + std::to_string(MEMRA_LL_SERVER_SLOTS) +
                   " jobs in flight): is the peer's worker issuing its half of the joins?",
               "MEMRA_LL_SERVER_STALLED");
  }
  void* slot = host_->slots[seq % MEMRA_LL_SERVER_SLOTS];
  MEMRA_CUDA_CHECK(env, device_, memra_tp_ll_server_job(&job, slot),
                   "memra_tp_ll_server_job(rows=" + std::to_string(job.rows) +
                       ", rowLen=" + std::to_string(job.row_len) + ")");
  // The job's words, then its slot's seq: the dispatcher reads a job ahead of its release once the
  // seq says the slot holds it (cu/tp_ll_server.cu). Then `issued`, and `issued` before `state` is
  // read (the Dekker pair of the grid's stop, cu/tp_ll_server.h): a full fence, since x86 lets a
  // load pass an earlier store. (The grid's reads of this memory see the CPU's stores:
  // scripts/probes/ll-server-probe.cu.)
  std::atomic_thread_fence(std::memory_order_release);
  host_->slotSeq[seq % MEMRA_LL_SERVER_SLOTS] = seq;
  std::atomic_thread_fence(std::memory_order_release);
  issued_ = seq;
  host_->issued = seq;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (host_->state != kMemraLlServerRunning) EnsureRunning(env, seq);

  // Release the job once the stream's earlier work is done (the write's default fence makes that
  // work's stores visible first). The stream's wait for the job is deferred (SettleWait): the
  // server runs jobs in order, each after the one before has finished, so a served join that
  // follows needs no wait, and waiting on every job cost the stream about 5 us a job
  // (scripts/probes/ll-server-timing.cu: 'wait' against 'nowait').
  const CUresult r =
      EnqueueMemOp(walk, CU_STREAM_MEM_OP_WRITE_VALUE_32, &ctl_->cmd, seq, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS) {
    Withdraw(env, seq, cudaSuccess,
             "launchLl: cuStreamBatchMemOp (release LL server job " + std::to_string(seq) + ") on device " +
                 std::to_string(device_) + " failed with CUresult " + std::to_string(static_cast<int>(r)));
  }
  unsettled_ = seq;
  walk_ = walk;
  jobs_++;
}

void LlServer::SettleWait(Napi::Env env, cudaStream_t s) {
  if (unsettled_ == 0 || s != walk_) return;
  const CUresult r = EnqueueMemOp(s, CU_STREAM_MEM_OP_WAIT_VALUE_32, &ctl_->done, unsettled_, CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) {
    // The stream must not run past an unfinished job: this thread's later calls on it are refused
    // with the same message until the wait is enqueued.
    ThrowError(env,
               "the LL server's wait for job " + std::to_string(unsettled_) + " on device " +
                   std::to_string(device_) + " could not be enqueued (cuStreamBatchMemOp: CUresult " +
                   std::to_string(static_cast<int>(r)) + "); close the runtime",
               "MEMRA_LL_SERVER");
  }
  unsettled_ = 0;
}

}  // namespace memra
