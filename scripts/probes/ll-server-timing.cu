// Where the LL server's ~23 us a job went (the LL server's first version), on one
// GPU with local-copy jobs (8 KB), without Node. Per job the server stamps when block 0 saw the
// walk stream's release (stamp[0]) and when the last block ended (stamp[1]). Modes:
//   wait    : per job one cuStreamBatchMemOp {write cmd, wait done >= seq} (the addon's path)
//   nowait  : per job {write cmd} only: the server's own pace when nothing waits on it
//   whost   : as wait, but the wait polls the server's mirror of done in mapped host memory
//   wait10  : as wait, with eight WRITE_VALUE_64 first (a job's words in device memory)
//   spin    : {write cmd}, then a tiny kernel on the walk stream spinning on done (instead of the
//             front end's wait) -- launched once per job, for comparison only
// Prints medians over jobs 20..N: kernel time (end - released), turnaround (released[k+1] -
// end[k]), wall per job, host time per submit.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. -DMEMRA_LL_SERVER_TRACE \
//          -o build/probes/ll-server-timing scripts/probes/ll-server-timing.cu cu/tp_ll_server.cu
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "cu/tp_ll_chunks.cuh"  // LlState: the link state a job points at
#include "cu/tp_ll_server.h"
#include "scripts/probes/ll_server_blocks.h"
#include "scripts/probes/probe_cuda.h"


using Clock = std::chrono::steady_clock;

__global__ void SpinUntil(const unsigned* done, unsigned seq) {
  while (static_cast<int>(*reinterpret_cast<const volatile unsigned*>(done) - seq) < 0) {}
}

extern "C" cudaError_t memra_tp_ll_server_trace(unsigned long long* out);

static double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  const int jobs = argc > 1 ? std::atoi(argv[1]) : 2000;
  CHECK(cudaSetDevice(0));
  auto batch = DriverEntry<PFN_cuStreamBatchMemOp_v11070>("cuStreamBatchMemOp");
  const int vals = 2048;
  const unsigned long long cap = 8192;
  void *selfState, *peerState, *selfRecv, *peerRecv;
  int* err;
  float *src, *dst;
  unsigned long long* stamps;
  unsigned long long* scratch;  // wait10's eight 64-bit writes (a job descriptor's size)
  CHECK(cudaMalloc(&scratch, 64));
  CHECK(cudaMalloc(&selfState, sizeof(LlState)));
  CHECK(cudaMalloc(&peerState, sizeof(LlState)));
  CHECK(cudaMalloc(&selfRecv, 4 * cap * 8));
  CHECK(cudaMalloc(&peerRecv, 4 * cap * 8));
  CHECK(cudaMalloc(&err, 4));
  CHECK(cudaMalloc(&src, vals * 4));
  CHECK(cudaMalloc(&dst, vals * 4));
  CHECK(cudaMalloc(&stamps, size_t(jobs) * 16));
  SpinUntil<<<1, 1>>>(reinterpret_cast<const unsigned*>(err), 0);  // loads the spin kernel before any grid is resident
  CHECK(cudaDeviceSynchronize());

  for (const std::string mode : {"wait", "nowait", "spin", "whost", "wait10", "wait"}) {
    const ServerBlocks blocks = AllocServerBlocks();
    MemraLlServerCtl* ctl = blocks.ctl;
    MemraLlServerHost *sh = blocks.host, *shDev = blocks.hostOnDevice;
    for (void* p : {selfState, peerState}) CHECK(cudaMemset(p, 0, sizeof(LlState)));
    CHECK(cudaMemset(stamps, 0, size_t(jobs) * 16));
    CHECK(cudaMemset(err, 0, 4));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t server, walk;
    CHECK(cudaStreamCreateWithFlags(&server, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&walk, cudaStreamNonBlocking));
    sh->state = kMemraLlServerRunning;
    CHECK(memra_tp_ll_server_launch(ctl, shDev, 1, 2000000ull, server));
    std::vector<double> hostUs;
    hostUs.reserve(jobs);
    const auto t0 = Clock::now();
    for (int j = 0; j < jobs; j++) {
      const unsigned seq = unsigned(j + 1);
      while (static_cast<int>(sh->done - (seq - MEMRA_LL_SERVER_SLOTS)) < 0) {}
      const auto s0 = Clock::now();
      const MemraLlJobArgs job{0, 1, vals, nullptr, src, dst, nullptr, vals, selfRecv, peerRecv, cap, selfState,
                               peerState, 0, err, 2000000000LL, stamps + 2 * j};
      CHECK(memra_tp_ll_server_job(&job, sh->slots[seq % MEMRA_LL_SERVER_SLOTS]));
      __sync_synchronize();
      sh->slotSeq[seq % MEMRA_LL_SERVER_SLOTS] = seq;
      __sync_synchronize();
      sh->issued = seq;
      __sync_synchronize();
      CUstreamBatchMemOpParams all[10];
      std::memset(all, 0, sizeof all);
      const bool ten = mode == "wait10";
      for (int w = 0; ten && w < 8; w++) {
        all[w].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        all[w].writeValue.address = reinterpret_cast<CUdeviceptr>(scratch + w);
        all[w].writeValue.value64 = (uint64_t(seq) << 8) | unsigned(w);
      }
      CUstreamBatchMemOpParams* ops = ten ? all + 8 : all;
      ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
      ops[0].writeValue.address = reinterpret_cast<CUdeviceptr>(&ctl->cmd);
      ops[0].writeValue.value = seq;
      ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
      ops[1].waitValue.address = mode == "whost" ? reinterpret_cast<CUdeviceptr>(&shDev->done)
                                                 : reinterpret_cast<CUdeviceptr>(&ctl->done);
      ops[1].waitValue.value = seq;
      ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
      const unsigned n = ten ? 10 : mode == "wait" || mode == "whost" ? 2 : 1;
      if (batch(reinterpret_cast<CUstream>(walk), n, all, 0) != CUDA_SUCCESS) { std::printf("FAIL batch\n"); return 1; }
      if (mode == "spin") SpinUntil<<<1, 1, 0, walk>>>(&ctl->done, seq);
      hostUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s0).count());
    }
    CHECK(cudaStreamSynchronize(walk));
    while (static_cast<int>(sh->done - unsigned(jobs)) < 0) {}
    const double wall = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    std::vector<unsigned long long> st(2 * size_t(jobs));
    CHECK(cudaMemcpy(st.data(), stamps, size_t(jobs) * 16, cudaMemcpyDeviceToHost));
    std::vector<double> kernel, turn;
    for (int j = 20; j < jobs; j++) {
      kernel.push_back((st[2 * j + 1] - st[2 * j]) / 1000.0);
      if (j + 1 < jobs) turn.push_back((double(st[2 * (j + 1)]) - double(st[2 * j + 1])) / 1000.0);
    }
    {
      // Phases of the last jobs, per block, relative to block 0's release: got the ticket, read
      // the job, ended its chunks, arrived.
      static unsigned long long tr[64][MEMRA_LL_SERVER_BLOCKS + 1][4];
      CHECK(memra_tp_ll_server_trace(&tr[0][0][0]));
      for (int j = jobs - 3; j < jobs; j++) {
        const unsigned k = unsigned(j + 1) % 64;
        const double base = double(st[2 * j]);
        std::printf("  job %d (released %.2f us after the job before ended):", j + 1,
                    j > 0 ? (double(st[2 * j]) - double(st[2 * j - 1])) / 1000 : 0.0);
        for (unsigned b = 0; b <= MEMRA_LL_SERVER_BLOCKS; b += 4) {
          std::printf(" b%u", b);
          for (int ph = 0; ph < 4; ph++) std::printf(" %.2f", (double(tr[k][b][ph]) - base) / 1000);
        }
        std::printf("\n");
      }
    }
    int errWord = 0;
    CHECK(cudaMemcpy(&errWord, err, 4, cudaMemcpyDeviceToHost));
    std::printf("%-7s %d jobs: kernel %.2f us, turnaround %.2f us, wall %.2f us/job, "
                "host submit %.2f us (median); err %d\n",
                mode.c_str(), jobs, Median(kernel), Median(turn), wall / jobs, Median(hostUs), errWord);
    // The grid stops itself 2 ms after the last job; wait for that, then free this round.
    const auto stopBy = Clock::now() + std::chrono::seconds(2);
    while (sh->state != kMemraLlServerStopped && Clock::now() < stopBy) {}
    if (sh->state != kMemraLlServerStopped) { std::printf("FAIL the grid did not stop\n"); return 1; }
    CHECK(cudaStreamSynchronize(server));
    CHECK(cudaStreamDestroy(server));
    CHECK(cudaStreamDestroy(walk));
    CHECK(cudaFree(ctl));
    CHECK(cudaFreeHost(sh));
  }
  std::printf("ok\n");
  return 0;
}
