// What an eager join's host time is made of, without Node (docs/performance.md, "The ring"):
//   1. one launch, back to back from one thread: the runtime API (cudaLaunchKernelEx, as the
//      addon does) against the driver API (cuLaunchKernel on a function resolved once), with a
//      parameter block the size of the LL join's;
//   2. a stream memory operation (cuStreamWriteValue32) and an event record, for comparison;
//   3. the join itself in native code: a main thread releases two pinned threads (one a device)
//      through a spin handshake, each launches once and publishes "done", the main thread waits
//      for both; with no launch (the handshake alone), one launching, both launching; for several
//      placements of the three threads.
// If (3) with both launching is well under the ring bench's join-kernel, the rest is Node's; if
// some placement is much cheaper than the runtime's own choice, the placement is the fix.
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -I. -o launch-probe scripts/probes/launch-probe.cu -lpthread
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <sched.h>

#include "scripts/probes/probe_cuda.h"

#define DCHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
  std::fprintf(stderr, "%s:%d %s: CUresult %d\n", __FILE__, __LINE__, #x, int(r_)); std::exit(1); } } while (0)

struct Params { unsigned long long w[16]; };  // 128 bytes, about the LL join's LlJob

__global__ void Empty(Params p) {
  if (p.w[0] == 1 && threadIdx.x == 0) reinterpret_cast<int*>(p.w[1])[0] = 1;
}

using Clock = std::chrono::steady_clock;
static double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
static double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
static double P99(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() * 99 / 100];
}
static void Pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    std::fprintf(stderr, "cannot pin to CPU %d\n", cpu);
    std::exit(1);
  }
}
static std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, CUstream, void**, void**);
using WriteValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned);
static LaunchFn launchFn = nullptr;
static WriteValueFn writeValueFn = nullptr;

struct DeviceSide {
  int device;
  cudaStream_t stream;
  CUfunction fn;
  int* word;
  Params p{};
};

static DeviceSide Open(int device) {
  DeviceSide d{};
  d.device = device;
  CHECK(cudaSetDevice(device));
  CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  cudaFunction_t f;
  CHECK(cudaGetFuncBySymbol(&f, reinterpret_cast<const void*>(Empty)));
  d.fn = reinterpret_cast<CUfunction>(f);
  CHECK(cudaMalloc(&d.word, 64));
  for (int i = 0; i < 16; i++) d.p.w[i] = 1000 + i;
  return d;
}

enum class How { Runtime, Driver, WriteValue, EventRecord, None };

static void LaunchOnce(DeviceSide& d, How how, unsigned i, cudaEvent_t ev) {
  d.p.w[2] = i;
  switch (how) {
    case How::Runtime: {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(1);
      cfg.blockDim = dim3(1024);
      cfg.stream = d.stream;
      CHECK(cudaLaunchKernelEx(&cfg, Empty, d.p));
      break;
    }
    case How::Driver: {
      void* args[] = {&d.p};
      DCHECK(launchFn(d.fn, 1, 1, 1, 1024, 1, 1, 0, reinterpret_cast<CUstream>(d.stream), args, nullptr));
      break;
    }
    case How::WriteValue:
      DCHECK(writeValueFn(reinterpret_cast<CUstream>(d.stream), reinterpret_cast<CUdeviceptr>(d.word), i, 0));
      break;
    case How::EventRecord: CHECK(cudaEventRecord(ev, d.stream)); break;
    case How::None: break;
  }
}

static const char* Name(How h) {
  switch (h) {
    case How::Runtime: return "runtime cudaLaunchKernelEx";
    case How::Driver: return "driver cuLaunchKernel";
    case How::WriteValue: return "cuStreamWriteValue32";
    case How::EventRecord: return "cudaEventRecord";
    default: return "nothing";
  }
}

// One thread, back to back.
static void Single(DeviceSide& d, How how, int cpu, int n) {
  Pin(cpu);
  CHECK(cudaSetDevice(d.device));
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  std::vector<double> s;
  s.reserve(n);
  for (int i = -n / 4; i < n; i++) {
    const auto t0 = Clock::now();
    LaunchOnce(d, how, unsigned(i), ev);
    const auto t1 = Clock::now();
    if (i >= 0) s.push_back(Us(t0, t1));
    if ((i & 1023) == 0) CHECK(cudaStreamSynchronize(d.stream));  // never let the queue fill
  }
  CHECK(cudaStreamSynchronize(d.stream));
  CHECK(cudaEventDestroy(ev));
  std::printf("single  dev %d cpu %2d  %-28s median %6.2f us  p99 %6.2f\n", d.device, cpu, Name(how), Median(s),
              P99(s));
}

// The join, natively: main releases both with `go`, each does its work and stores `done`.
struct alignas(128) Line { std::atomic<unsigned> v{0}; };
static Line go[2], done[2];
static std::atomic<bool> quit{false};

static void Worker(DeviceSide* d, int rank, int cpu, How how) {
  Pin(cpu);
  CHECK(cudaSetDevice(d->device));
  cudaEvent_t ev;
  CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  unsigned seen = 0;
  while (!quit.load(std::memory_order_relaxed)) {
    const unsigned g = go[rank].v.load(std::memory_order_acquire);
    if (g == seen) continue;
    seen = g;
    LaunchOnce(*d, how, g, ev);
    if ((g & 1023) == 0) CHECK(cudaStreamSynchronize(d->stream));
    done[rank].v.store(g, std::memory_order_release);
  }
  CHECK(cudaEventDestroy(ev));
}

static void Join(DeviceSide* d, int mainCpu, int cpu0, int cpu1, How how0, How how1, int n) {
  quit = false;
  for (auto& l : go) l.v = 0;
  for (auto& l : done) l.v = 0;
  std::thread a(Worker, &d[0], 0, cpu0, how0), b(Worker, &d[1], 1, cpu1, how1);
  Pin(mainCpu);
  std::vector<double> s;
  s.reserve(n);
  for (int i = -n / 4; i < n; i++) {
    const unsigned seq = unsigned(i + n / 4 + 1);
    const auto t0 = Clock::now();
    go[0].v.store(seq, std::memory_order_release);
    go[1].v.store(seq, std::memory_order_release);
    while (done[0].v.load(std::memory_order_acquire) != seq || done[1].v.load(std::memory_order_acquire) != seq) {
    }
    const auto t1 = Clock::now();
    if (i >= 0) s.push_back(Us(t0, t1));
  }
  quit = true;
  a.join();
  b.join();
  std::printf("join    main %2d w0 %2d w1 %2d  %-22s / %-22s median %6.2f us  p99 %6.2f\n", mainCpu, cpu0, cpu1,
              Name(how0), Name(how1), Median(s), P99(s));
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int ncpu = int(std::thread::hardware_concurrency());
  std::printf("cpus %d\n", ncpu);
  for (int c = 0; c < ncpu; c++) {
    std::printf("cpu %2d siblings %-8s core %s package %s\n", c,
                Read("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list").c_str(),
                Read("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/core_id").c_str(),
                Read("/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/physical_package_id").c_str());
  }
  launchFn = DriverEntry<LaunchFn>("cuLaunchKernel");
  writeValueFn = DriverEntry<WriteValueFn>("cuStreamWriteValue32");
  DeviceSide d[2] = {Open(0), Open(1)};
  for (int r = 0; r < 2; r++) {
    char bus[32];
    CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, r));
    for (char* c = bus; *c; c++) *c = char(std::tolower(*c));
    std::printf("gpu %d %s local_cpulist %s\n", r, bus,
                Read(std::string("/sys/bus/pci/devices/") + bus + "/local_cpulist").c_str());
  }
  const int hi = ncpu - 1;
  for (How h : {How::Runtime, How::Driver, How::WriteValue, How::EventRecord}) Single(d[0], h, hi, n);
  Single(d[1], How::Runtime, hi - 1, n);
  Single(d[0], How::Runtime, 1, n);
  Single(d[0], How::Runtime, hi / 2, n);
  struct Place { int m, w0, w1; };
  const Place places[] = {{2, hi, hi - 1}, {hi - 2, hi, hi - 1}, {2, hi, hi / 2}, {2, hi / 2 + 1, 1}, {2, 8, 24}};
  for (const Place& p : places) {
    Join(d, p.m, p.w0, p.w1, How::None, How::None, n);
    Join(d, p.m, p.w0, p.w1, How::Runtime, How::None, n);
    Join(d, p.m, p.w0, p.w1, How::Runtime, How::Runtime, n);
    Join(d, p.m, p.w0, p.w1, How::Driver, How::Driver, n);
  }
  for (int r = 0; r < 2; r++) {
    CHECK(cudaSetDevice(r));
    CHECK(cudaDeviceSynchronize());
  }
  std::printf("ok\n");
  return 0;
}
