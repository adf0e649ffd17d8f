// Why the LL server's first job faulted (docs/performance.md, "The eager join's host time"), without Node, on one GPU:
//   T1  a kernel reads CPU-written mapped host memory, through the host address and through
//       cudaHostGetDevicePointer's: does it see what the CPU wrote?
//   T2  the same from a kernel already running, released by cuStreamWriteValue32 after the CPU
//       wrote (the server's order of events).
//   T3  the server itself (cu/tp_ll_server.cu) with local-copy-only LL jobs (no peer needed):
//       results, stamps, the idle stop and a relaunch.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. -o build/probes/ll-server-probe \
//          scripts/probes/ll-server-probe.cu cu/tp_ll_server.cu
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "cu/tp_ll_chunks.cuh"  // LlState: the link state a job points at
#include "cu/tp_ll_server.h"
#include "scripts/probes/ll_server_blocks.h"
#include "scripts/probes/probe_cuda.h"



__global__ void ReadHost(const unsigned* h, unsigned* out, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = reinterpret_cast<const volatile unsigned*>(h)[i];
}

__global__ void WaitThenRead(const unsigned* flag, const unsigned* h, unsigned* out, int n) {
  if (threadIdx.x == 0) while (*reinterpret_cast<const volatile unsigned*>(flag) < 1u) {}
  __syncthreads();
  __threadfence();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = reinterpret_cast<const volatile unsigned*>(h)[i];
}

static int Mismatches(const std::vector<unsigned>& got, unsigned salt) {
  int bad = 0;
  for (size_t i = 0; i < got.size(); i++) {
    if (got[i] != unsigned(i) * 7u + salt) {
      if (bad < 3) std::printf("    word %zu: got %08x want %08x\n", i, got[i], unsigned(i) * 7u + salt);
      bad++;
    }
  }
  return bad;
}

int main() {
  CHECK(cudaSetDevice(0));
  const int n = 4096;
  unsigned *host = nullptr, *hostDev = nullptr, *out = nullptr, *flag = nullptr;
  CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host), n * 4, cudaHostAllocMapped | cudaHostAllocPortable));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&hostDev), host, 0));
  CHECK(cudaMalloc(&out, n * 4));
  CHECK(cudaMalloc(&flag, 4));
  std::printf("T1 host %p device view %p (%s)\n", static_cast<void*>(host), static_cast<void*>(hostDev),
              host == hostDev ? "same" : "DIFFERENT");
  std::vector<unsigned> got(n);
  for (int i = 0; i < n; i++) host[i] = unsigned(i) * 7u + 1u;
  for (unsigned* p : {host, hostDev}) {
    CHECK(cudaMemset(out, 0xff, n * 4));
    ReadHost<<<1, 256>>>(p, out, n);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(got.data(), out, n * 4, cudaMemcpyDeviceToHost));
    std::printf("T1 through %s address: %d mismatches\n", p == host ? "the host" : "the device", Mismatches(got, 1u));
  }

  auto writeValue = DriverEntry<PFN_cuStreamWriteValue32_v11070>("cuStreamWriteValue32");
  cudaStream_t a, b;
  CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  CHECK(cudaMemset(flag, 0, 4));
  CHECK(cudaMemset(out, 0xff, n * 4));
  CHECK(cudaDeviceSynchronize());
  WaitThenRead<<<1, 256, 0, a>>>(flag, hostDev, out, n);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  for (int i = 0; i < n; i++) host[i] = unsigned(i) * 7u + 2u;
  if (writeValue(reinterpret_cast<CUstream>(b), reinterpret_cast<CUdeviceptr>(flag), 1, 0) != CUDA_SUCCESS) {
    std::printf("FAIL write value\n");
    return 1;
  }
  CHECK(cudaStreamSynchronize(a));
  CHECK(cudaMemcpy(got.data(), out, n * 4, cudaMemcpyDeviceToHost));
  std::printf("T2 a running kernel released after the CPU wrote: %d mismatches\n", Mismatches(got, 2u));

  // T3: the server with local-copy-only jobs.
  auto batch = DriverEntry<PFN_cuStreamBatchMemOp_v11070>("cuStreamBatchMemOp");
  const ServerBlocks blocks = AllocServerBlocks();
  MemraLlServerCtl* ctl = blocks.ctl;
  MemraLlServerHost *sh = blocks.host, *shDev = blocks.hostOnDevice;
  const int vals = 1000, jobs = 20;
  const unsigned long long cap = 8192;
  void *selfState, *peerState, *selfRecv, *peerRecv;
  int* err;
  float *src, *dst;
  unsigned long long* stamps;
  CHECK(cudaMalloc(&selfState, sizeof(LlState)));
  CHECK(cudaMalloc(&peerState, sizeof(LlState)));
  CHECK(cudaMalloc(&selfRecv, 4 * cap * 8));
  CHECK(cudaMalloc(&peerRecv, 4 * cap * 8));
  CHECK(cudaMalloc(&err, 4));
  CHECK(cudaMalloc(&src, jobs * vals * 4));
  CHECK(cudaMalloc(&dst, jobs * vals * 4));
  CHECK(cudaMalloc(&stamps, jobs * 16));
  for (void* p : {selfState, peerState, selfRecv, peerRecv})
    CHECK(cudaMemset(p, 0, p == selfRecv || p == peerRecv ? 4 * cap * 8 : sizeof(LlState)));
  CHECK(cudaMemset(err, 0, 4));
  CHECK(cudaMemset(stamps, 0, jobs * 16));
  CHECK(cudaMemset(dst, 0xff, jobs * vals * 4));
  std::vector<float> hsrc(jobs * vals);
  for (int i = 0; i < jobs * vals; i++) hsrc[i] = float(i % 9973) + 0.5f;
  CHECK(cudaMemcpy(src, hsrc.data(), jobs * vals * 4, cudaMemcpyHostToDevice));
  CHECK(cudaDeviceSynchronize());

  cudaStream_t server, walk;
  CHECK(cudaStreamCreateWithFlags(&server, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&walk, cudaStreamNonBlocking));
  unsigned gen = 0;
  auto submit = [&](unsigned seq, int j) {
    void* slot = sh->slots[seq % MEMRA_LL_SERVER_SLOTS];
    const MemraLlJobArgs job{0, 1, vals, nullptr, src + j * vals, dst + j * vals, nullptr, vals, selfRecv, peerRecv,
                             cap, selfState, peerState, 0, err, 2000000000LL, stamps + 2 * j};
    CHECK(memra_tp_ll_server_job(&job, slot));
    __sync_synchronize();
    sh->slotSeq[seq % MEMRA_LL_SERVER_SLOTS] = seq;
    __sync_synchronize();
    sh->issued = seq;
    __sync_synchronize();
    if (sh->state != kMemraLlServerRunning) {
      while (sh->state == kMemraLlServerExiting) {}
      if (sh->state == kMemraLlServerStopped) {
        sh->state = kMemraLlServerRunning;
        CHECK(memra_tp_ll_server_launch(ctl, shDev, ++gen, 2000000ull, server));
      }
    }
    CUstreamBatchMemOpParams ops[2];
    std::memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = reinterpret_cast<CUdeviceptr>(&ctl->cmd);
    ops[0].writeValue.value = seq;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = reinterpret_cast<CUdeviceptr>(&ctl->done);
    ops[1].waitValue.value = seq;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
    const CUresult r = batch(reinterpret_cast<CUstream>(walk), 2, ops, 0);
    if (r != CUDA_SUCCESS) { std::printf("FAIL batch %d\n", int(r)); std::exit(1); }
  };
  for (int j = 0; j < jobs - 1; j++) submit(unsigned(j + 1), j);
  // The job the host wrote, as the host reads it back: the probe that found the -O2 aliasing bug.
  std::printf("T3 slot 1's stamp word %llx, job 0's stamp %p\n",
              reinterpret_cast<unsigned long long*>(sh->slots[1])[15], static_cast<void*>(stamps));
  CHECK(cudaStreamSynchronize(walk));
  std::printf("T3 %d jobs: walk stream done, server done %u, state %u\n", jobs - 1, sh->done, sh->state);
  // Idle stop, then one more job on a relaunched grid.
  const auto t0 = std::chrono::steady_clock::now();
  while (sh->state != kMemraLlServerStopped && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {}
  std::printf("T3 idle stop: state %u after %.1f ms\n", sh->state,
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  submit(unsigned(jobs), jobs - 1);
  CHECK(cudaStreamSynchronize(walk));
  std::vector<float> hdst(jobs * vals);
  std::vector<unsigned long long> hst(2 * jobs);
  int errWord = 0;
  CHECK(cudaMemcpy(hdst.data(), dst, jobs * vals * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hst.data(), stamps, jobs * 16, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&errWord, err, 4, cudaMemcpyDeviceToHost));
  int bad = 0, badStamps = 0;
  for (int i = 0; i < jobs * vals; i++) if (hdst[i] != hsrc[i]) bad++;
  for (int j = 0; j < jobs; j++) if (hst[2 * j] == 0 || hst[2 * j + 1] < hst[2 * j]) badStamps++;
  std::printf("T3 %d jobs, %d grids: %d wrong values, %d bad stamps, err %d; job 0 took %.2f us on the device\n", jobs,
              gen, bad, badStamps, errWord, (hst[1] - hst[0]) / 1000.0);
  std::printf("%s\n", bad == 0 && badStamps == 0 && errWord == 0 ? "ok" : "FAIL");
  return 0;
}
