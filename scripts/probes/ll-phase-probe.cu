// Where an 8 KB LL join's ~2 us in a graph goes (the all-gather's 2 us target), on two
// GPUs without Node. Each rank captures 100 launched joins into its own graph, as the joins bench
// does, with the launched kernel built with MEMRA_LL_PHASE_TRACE: thread 0 of each chunk's block
// stamps %globaltimer (32 ns steps on H200) at each phase of cu/tp_ll_chunks.cuh's LlPhase.
// Per rank it prints medians over the middle joins of the last replay:
//   resident   Released - Arrive          a PDL grid waiting for the kernel ahead to end
//   boundary   Released[k+1] - Done[k]    this kernel's end to the next one's release
//   send       Sent - Released            the epoch, the ack and the inputs loaded, the line stored
//   wait       Received - Sent            this thread's line arriving (the crossing, and skew)
//   sync       Synced - Received          the block's other lines, and the barrier
//   tail       Done - Synced              the epoch and ack stores
//   period     Released[k+1] - Released[k]
// and, for the two-way ops, the crossing with the two clocks' offset cancelled:
//   ((Received_0 - Sent_1) + (Received_1 - Sent_0)) / 2, each side in its own GPU's clock.
// Cases: all-gather 8 KB (two chunks a rank), all-reduce and broadcast 8 KB (four); each with
// and without programmatic dependent launch.
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -I. -DMEMRA_LL_PHASE_TRACE \
//          -o build/probes/ll-phase-probe scripts/probes/ll-phase-probe.cu cu/tp_ll.cu
#include <algorithm>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "cu/kernels.h"
#include "cu/tp_ll_chunks.cuh"  // LlState, LlPhase
#include "scripts/probes/probe_cuda.h"

extern "C" cudaError_t memra_tp_ll_phase_trace(unsigned long long* out);
extern "C" cudaError_t memra_tp_ll_phase_trace_reset(void);

namespace {

constexpr int kOps = 100;      // joins a graph, as the joins bench
constexpr int kReplays = 3;    // the last one is read
constexpr uint64_t kCap = 4096;  // values a slot set holds (8 KB joins need at most 2048)
constexpr long long kSpin = 2000000000LL;
using Trace = unsigned long long[128][4][kPhases];

struct Rank {
  int dev = 0;
  cudaStream_t s = nullptr;
  void *state = nullptr, *recv = nullptr;
  float *x = nullptr, *y = nullptr;  // inputs (never zeros) and outputs
  int* err = nullptr;
};

enum class Op { kAllGather, kAllReduce, kBroadcast };

const char* Name(Op op) {
  return op == Op::kAllGather ? "all-gather" : op == Op::kAllReduce ? "all-reduce" : "broadcast";
}

// One join on rank r, as the ll transport issues it (src/runtime/transports/ll.ts), 8 KB.
void Issue(Op op, Rank* ranks, int r, int pdl) {
  Rank& me = ranks[r];
  Rank& peer = ranks[1 - r];
  const uint64_t n = 2048, span = n / 2;
  const float *send = nullptr, *local = nullptr;
  float *localDst = nullptr, *recvDst = nullptr;
  uint64_t rowLen = n;
  int reduce = 0;
  switch (op) {
    case Op::kAllGather:
      rowLen = span;
      send = local = me.x;
      localDst = me.y + r * span;
      recvDst = me.y + (1 - r) * span;
      break;
    case Op::kAllReduce:
      reduce = 1;
      send = me.x;
      recvDst = me.y;
      break;
    case Op::kBroadcast:  // from rank 0
      if (r == 0) {
        send = local = me.x;
        localDst = me.y;
      } else {
        recvDst = me.y;
      }
      break;
  }
  const MemraLlJobArgs job{reduce, 1, rowLen, send, local, localDst, recvDst, op == Op::kAllGather ? n : rowLen,
                           me.recv, peer.recv, kCap, me.state, peer.state, r, me.err, kSpin, nullptr};
  CHECK(memra_tp_ll_exchange(&job, pdl, 0, me.s));
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void RunCase(Rank* ranks, Op op, int pdl) {
  cudaGraphExec_t exec[2];
  for (int r = 0; r < 2; r++) {
    CHECK(cudaSetDevice(ranks[r].dev));
    CHECK(cudaMemsetAsync(ranks[r].state, 0, sizeof(LlState), ranks[r].s));
    CHECK(cudaMemsetAsync(ranks[r].recv, 0, 4 * kCap * 8, ranks[r].s));
    CHECK(cudaStreamSynchronize(ranks[r].s));
    CHECK(memra_tp_ll_phase_trace_reset());  // a phase this case never passes reads 0
  }
  for (int r = 0; r < 2; r++) {
    CHECK(cudaSetDevice(ranks[r].dev));
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(ranks[r].s, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < kOps; k++) Issue(op, ranks, r, pdl);
    CHECK(cudaStreamEndCapture(ranks[r].s, &g));
    CHECK(cudaGraphInstantiate(&exec[r], g, 0));
    CHECK(cudaGraphDestroy(g));
  }
  for (int i = 0; i < kReplays; i++) {
    for (int r = 0; r < 2; r++) {
      CHECK(cudaSetDevice(ranks[r].dev));
      CHECK(cudaGraphLaunch(exec[r], ranks[r].s));
    }
  }
  static Trace trace[2];
  for (int r = 0; r < 2; r++) {
    CHECK(cudaSetDevice(ranks[r].dev));
    CHECK(cudaStreamSynchronize(ranks[r].s));
    int err = 0;
    CHECK(cudaMemcpy(&err, ranks[r].err, 4, cudaMemcpyDeviceToHost));
    if (err != 0) { std::printf("FAIL %s rank %d: refusal word %d\n", Name(op), r, err); std::exit(1); }
    CHECK(memra_tp_ll_phase_trace(&trace[r][0][0][0]));
    CHECK(cudaGraphExecDestroy(exec[r]));
  }
  // Epochs of the last replay: (kReplays - 1) * kOps + 1 .. kReplays * kOps; its middle 80.
  const unsigned first = (kReplays - 1) * kOps + 11, last = kReplays * kOps - 10;
  const int chunks = op == Op::kAllGather ? 2 : 4;  // 256 lines (512 values) a chunk
  std::printf("%s 8 KB, %s:\n", Name(op), pdl ? "PDL" : "no PDL");
  for (int r = 0; r < 2; r++) {
    std::vector<double> resident, boundary, send, wait, sync, tail, period;
    for (unsigned e = first; e < last; e++) {
      for (int c = 0; c < chunks; c++) {
        const unsigned long long* p = trace[r][e % 128][c];
        const unsigned long long* q = trace[r][(e + 1) % 128][c];
        resident.push_back(double(p[kPhaseReleased] - p[kPhaseArrive]));
        boundary.push_back(double(q[kPhaseReleased]) - double(p[kPhaseDone]));
        if (p[kPhaseSent] != 0) send.push_back(double(p[kPhaseSent] - p[kPhaseReleased]));
        if (p[kPhaseReceived] != 0) {
          wait.push_back(double(p[kPhaseReceived]) - double(p[kPhaseSent] != 0 ? p[kPhaseSent] : p[kPhaseReleased]));
          sync.push_back(double(p[kPhaseSynced] - p[kPhaseReceived]));
        }
        tail.push_back(double(p[kPhaseDone] - p[kPhaseSynced]));
        period.push_back(double(q[kPhaseReleased] - p[kPhaseReleased]));
      }
    }
    std::printf("  rank %d (ns): resident %.0f boundary %.0f send %.0f wait %.0f sync %.0f tail %.0f period %.0f\n",
                r, Median(resident), Median(boundary), Median(send), Median(wait), Median(sync),
                Median(tail), Median(period));
  }
  if (op != Op::kBroadcast) {
    std::vector<double> crossing;
    for (unsigned e = first; e < last; e++) {
      for (int c = 0; c < chunks; c++) {
        const unsigned long long* a = trace[0][e % 128][c];
        const unsigned long long* b = trace[1][e % 128][c];
        crossing.push_back(((double(a[kPhaseReceived]) - double(b[kPhaseSent])) +
                            (double(b[kPhaseReceived]) - double(a[kPhaseSent]))) / 2);
      }
    }
    std::printf("  crossing, clock offset cancelled (ns): %.0f\n", Median(crossing));
  }
}

}  // namespace

int main() {
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < 2) { std::printf("FAIL the probe needs two GPUs and sees %d\n", n); return 1; }
  Rank ranks[2];
  for (int r = 0; r < 2; r++) {
    Rank& me = ranks[r];
    me.dev = r;
    CHECK(cudaSetDevice(r));
    CHECK(cudaDeviceEnablePeerAccess(1 - r, 0));
    CHECK(cudaStreamCreateWithFlags(&me.s, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&me.state, sizeof(LlState)));
    CHECK(cudaMalloc(&me.recv, 4 * kCap * 8));
    CHECK(cudaMalloc(&me.x, 2048 * 4));
    CHECK(cudaMalloc(&me.y, 2048 * 4));
    CHECK(cudaMalloc(&me.err, 4));
    CHECK(cudaMemset(me.err, 0, 4));
    std::vector<float> h(2048);
    for (int i = 0; i < 2048; i++) h[i] = float((i * 7 + r * 13) % 1001) + 0.5f;
    CHECK(cudaMemcpy(me.x, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  }
  for (Op op : {Op::kAllGather, Op::kAllReduce, Op::kBroadcast}) {
    for (int pdl : {1, 0}) RunCase(ranks, op, pdl);
  }
  std::printf("done\n");
  return 0;
}
