// Which streams share a hardware work queue, and what a cross-stream wait does to a stream that
// shares one (docs/reliability.md, "Two ranks on one card").
//
// CUDA feeds a device through CUDA_DEVICE_MAX_CONNECTIONS queues (8 by default, at most 32), and
// streams are spread over them. A queue is read in order, so a launch that must wait for the
// kernel before it on its own stream holds every stream's work queued behind it in that queue.
// In loopback the two ranks' streams are on one device: rank 0's join kernel waiting for rank 1's
// half, with rank 0's next launch queued behind it, blocks rank 1's half if the two streams share
// a queue and rank 1's launch came later. Each test here is that pattern:
//   kernel: on A a kernel spinning until a flag is set (bounded), then a kernel that follows it;
//           on B, enqueued last, the kernel that sets the flag;
//   memop:  on A a stream memory operation waiting for the flag; on B the kernel that sets it.
// The two streams share a queue when B's kernel has not set the flag in 300 ms; the host then
// sets it itself, so no test hangs. Streams are tested in pairs (s0, sj) over a run of streams
// made one after another, and again after most of them were destroyed and more made.
// Measured on one H200 (CUDA 13.0): with the default connections, 8 or 32, none of 39 streams
// shared s0's queue, in either sweep; with CUDA_DEVICE_MAX_CONNECTIONS=1 every one did.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. -o build/probes/queue-share-probe
//        scripts/probes/queue-share-probe.cu
// Run:   build/probes/queue-share-probe [streams]   (CUDA_DEVICE_MAX_CONNECTIONS as the test asks)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "cu/globaltimer.cuh"
#include "scripts/probes/probe_cuda.h"

namespace {

constexpr unsigned long long kSpinNs = 2000000000ull;  // the kernel waiter's own bound: 2 s
constexpr auto kRescue = std::chrono::milliseconds(300);

__global__ void SpinUntil(const volatile unsigned* flag, unsigned want, unsigned* timedOut) {
  const unsigned long long t0 = GlobalTimerNs();
  while (*flag != want) {
    if (GlobalTimerNs() - t0 > kSpinNs) {
      *timedOut = 1;
      return;
    }
  }
}

__global__ void Follow() {}

__global__ void SetFlag(volatile unsigned* flag, unsigned v) { *flag = v; }

struct Flags {
  unsigned* host = nullptr;    // mapped pinned: [0] the flag, [1] the spinner's timeout
  unsigned* device = nullptr;  // the same, as the device sees it
};

PFN_cuStreamBatchMemOp_v11070 g_batch = nullptr;

void WaitValue(cudaStream_t s, const unsigned* address, unsigned value) {
  CUstreamBatchMemOpParams op = {};
  op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  op.waitValue.address = reinterpret_cast<CUdeviceptr>(address);
  op.waitValue.value = value;
  op.waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  if (g_batch(reinterpret_cast<CUstream>(s), 1, &op, 0) != CUDA_SUCCESS) {
    std::printf("FAIL cuStreamBatchMemOp\n");
    std::exit(1);
  }
}

// True when B's setter could not run while A's waiter held their queue.
bool Shared(Flags& f, cudaStream_t a, cudaStream_t b, bool memop, unsigned tag) {
  volatile unsigned* flag = f.host;
  flag[0] = 0;
  flag[1] = 0;
  if (memop) {
    WaitValue(a, f.device, tag);
  } else {
    SpinUntil<<<1, 1, 0, a>>>(f.device, tag, f.device + 1);
    Follow<<<1, 1, 0, a>>>();
  }
  SetFlag<<<1, 1, 0, b>>>(f.device, tag);
  CHECK(cudaGetLastError());
  const auto deadline = std::chrono::steady_clock::now() + kRescue;
  bool set = false;
  while (!(set = flag[0] == tag) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  if (!set) flag[0] = tag;  // the rescue: A's waiter ends, and B's setter with it
  CHECK(cudaStreamSynchronize(a));
  CHECK(cudaStreamSynchronize(b));
  return !set;
}

std::vector<cudaStream_t> MakeStreams(int n) {
  std::vector<cudaStream_t> s(n);
  for (auto& x : s) CHECK(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking));
  return s;
}

// Prints the j of every sj that shares s0's queue, for both waiters.
void Sweep(Flags& f, const char* what, cudaStream_t s0, const std::vector<cudaStream_t>& s, unsigned& tag) {
  for (int memop = 0; memop < 2; memop++) {
    std::printf("%s %s: shares s0's queue at", what, memop ? "memop" : "kernel");
    int shared = 0;
    for (size_t j = 0; j < s.size(); j++) {
      if (s[j] == s0) continue;
      if (Shared(f, s0, s[j], memop != 0, ++tag)) {
        std::printf(" %zu", j);
        shared++;
      }
    }
    std::printf(" (%d of %zu)\n", shared, s.size() - 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Lazily, the setter's first launch would wait for the spinner to end, whatever the queues
  // (implicit-sync-probe.cu): every pair would look shared.
  if (std::getenv("CUDA_MODULE_LOADING") == nullptr) setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  const int n = argc > 1 ? std::atoi(argv[1]) : 40;
  const char* env = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  std::printf("CUDA_DEVICE_MAX_CONNECTIONS=%s, %d streams\n", env ? env : "(unset)", n);
  g_batch = DriverEntry<PFN_cuStreamBatchMemOp_v11070>("cuStreamBatchMemOp");
  Flags f;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&f.host), 256, cudaHostAllocMapped));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&f.device), f.host, 0));
  unsigned tag = 0;

  std::vector<cudaStream_t> s = MakeStreams(n);
  Sweep(f, "made in a row, s0..", s[0], s, tag);

  // Destroy all but s0 and s1, make as many again: does the spread restart, or carry on?
  for (int j = 2; j < n; j++) CHECK(cudaStreamDestroy(s[j]));
  std::vector<cudaStream_t> t = MakeStreams(n - 2);
  t.insert(t.begin(), s[1]);
  std::printf("after destroying s2..s%d and making %d more (index 0 is s1, 1.. the new ones):\n", n - 1, n - 2);
  Sweep(f, "remade", s[0], t, tag);
  return 0;
}
