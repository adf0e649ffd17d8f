// Whether a weight matrix can be pulled into L2 while the step's latency-bound kernels run, and
// what that buys the product that reads it next. `bench`'s Wo ([4096][4096] bf16, 33.5 MB) after
// a flush of L2, timed as differences of CUDA graphs (no event between two kernels):
//   - the product cold, and warm after a prefetch kernel of B blocks (line prefetches or bulk
//     prefetches), and the prefetch's own time;
//   - the prefetch hidden inside a latency-bound kernel (a spin of a few µs on 4 blocks, as the
//     attention at short contexts is) against the same kernel without it;
//   - whether the prefetched lines survive an expert-sized stream (300 MB) read with normal loads
//     or with evict-first loads (__ldcs) between the prefetch and the product.
//
//   nvcc -std=c++17 -O3 -arch=sm_90a -I. scripts/probes/l2-prefetch-probe.cu cu/model.cu \
//        cu/model_moe.cu cu/model_gemv.cu cu/model_latent_query.cu cu/model_experts.cu \
//        cu/model_norm_gemv.cu cu/model_attention.cu cu/model_weights.cu \
//        -o build/probes/l2-prefetch-probe
#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "cu/model.h"
#include "scripts/probes/probe_cuda.h"

namespace {

constexpr int kReplays = 21;

__global__ void fill(float* x, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = 0.01f * float(i % 97) - 0.4f;
}

__global__ void stream_read(const uint4* p, size_t n, bool evictFirst, unsigned* sink) {
  uint32_t acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = evictFirst ? __ldcs(p + i) : __ldg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

// Every 128-byte line of [p, p + bytes) once, spread over the grid.
__global__ void prefetch_lines(const char* p, size_t bytes) {
  for (size_t o = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * 128; o < bytes;
       o += size_t(gridDim.x) * blockDim.x * 128) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
  }
}

__global__ void prefetch_bulk(const char* p, size_t bytes, unsigned chunk) {
  for (size_t o = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * size_t(chunk); o < bytes;
       o += size_t(gridDim.x) * blockDim.x * size_t(chunk)) {
    const unsigned n = unsigned(bytes - o < chunk ? bytes - o : chunk);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + o), "r"(n) : "memory");
  }
}

// A latency-bound kernel: each block spins `ns` of globaltimer, and with `bytes`, first issues its
// share of line prefetches of p.
__global__ void latency_kernel(unsigned long long ns, const char* p, size_t bytes) {
  if (bytes) {
    for (size_t o = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) * 128; o < bytes;
         o += size_t(gridDim.x) * blockDim.x * 128) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
    }
  }
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

double GraphUs(cudaStream_t s, const std::function<void()>& body) {
  return GraphReplayUs(s, body, body, kReplays);
}

}  // namespace

int main() {
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const uint32_t K = 4096, N = 4096;
  const size_t woBytes = size_t(K) * N * 2, flushBytes = size_t(512) << 20, expertBytes = size_t(300) << 20;
  uint16_t* wo;
  char *flush, *experts;
  float *x, *y;
  unsigned* sink;
  CHECK(cudaMalloc(&wo, woBytes));
  CHECK(cudaMalloc(&flush, flushBytes));
  CHECK(cudaMalloc(&experts, expertBytes));
  CHECK(cudaMalloc(&x, K * 4));
  CHECK(cudaMalloc(&y, N * 4));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(memra_gen_weights(wo, 1, 4, 0, K, N, 0, N, 0, 1.0f / 64, s));
  fill<<<16, 256, 0, s>>>(x, K);
  CHECK(memra_gen_weights(reinterpret_cast<uint16_t*>(flush), 2, 6, 0, 1, flushBytes / 2, 0, flushBytes / 2, 0, 1.0f,
                          s));
  CHECK(cudaStreamSynchronize(s));
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  auto doFlush = [&] {
    stream_read<<<sms * 4, 512, 0, s>>>(reinterpret_cast<const uint4*>(flush), flushBytes / 16, false, sink);
  };
  auto gemv = [&] { CHECK(memra_gemv(y, N, x, K, wo, N, K, N, 1, 0, 0, s)); };
  auto lines = [&](int blocks) {
    return [&, blocks] { prefetch_lines<<<blocks, 256, 0, s>>>(reinterpret_cast<const char*>(wo), woBytes); };
  };
  auto bulk = [&](int blocks, unsigned chunk) {
    return [&, blocks, chunk] {
      prefetch_bulk<<<blocks, 32, 0, s>>>(reinterpret_cast<const char*>(wo), woBytes, chunk);
    };
  };

  const double base = GraphUs(s, doFlush);
  const double cold = GraphUs(s, [&] { doFlush(); gemv(); }) - base;
  const double hot = GraphUs(s, [&] { gemv(); gemv(); }) / 2;  // the second finds it all in L2
  std::printf("flush %.1f us; Wo cold %.1f us (%.0f GB/s); Wo back to back %.1f us\n", base, cold, woBytes / cold / 1e3,
              hot);

  struct V { const char* name; std::function<void()> pf; };
  std::vector<V> vs = {
      {"lines x4", lines(4)},      {"lines x16", lines(16)},        {"lines x66", lines(66)},
      {"lines x132", lines(sms)},  {"bulk 64K x4", bulk(4, 65536)},  {"bulk 16K x16", bulk(16, 16384)},
      {"bulk 64K x16", bulk(16, 65536)}, {"bulk 256K x4", bulk(4, 262144)}, {"bulk 16K x132", bulk(sms, 16384)},
  };
  for (const V& v : vs) {
    const double pf = GraphUs(s, [&] { doFlush(); v.pf(); }) - base;
    const double warm = GraphUs(s, [&] { doFlush(); v.pf(); gemv(); }) - base - pf;
    std::printf("prefetch %-14s own %.1f us; Wo after it %.1f us\n", v.name, pf, warm);
  }

  // Hidden in a latency-bound kernel of 4 blocks (x 256 threads) spinning 15 us.
  for (int blocks : {4, 16}) {
    auto lat = [&](size_t bytes) {
      latency_kernel<<<blocks, 256, 0, s>>>(15000, reinterpret_cast<const char*>(wo), bytes);
    };
    const double plain = GraphUs(s, [&] { doFlush(); lat(0); gemv(); }) - base;
    const double with = GraphUs(s, [&] { doFlush(); lat(woBytes); gemv(); }) - base;
    const double latAlone = GraphUs(s, [&] { doFlush(); lat(woBytes); }) - base;
    std::printf("15 us kernel x%d then Wo: %.1f us; prefetching Wo inside it: %.1f us "
                "(kernel alone with the prefetch %.1f)\n",
                blocks, plain, with, latAlone);
  }

  // Survival across a 300 MB stream.
  for (bool evictFirst : {false, true}) {
    auto expertStream = [&] {
      stream_read<<<sms * 4, 512, 0, s>>>(reinterpret_cast<const uint4*>(experts), expertBytes / 16, evictFirst, sink);
    };
    const double st = GraphUs(s, [&] { doFlush(); lines(sms)(); expertStream(); }) - base;
    const double after = GraphUs(s, [&] { doFlush(); lines(sms)(); expertStream(); gemv(); }) - base - st;
    std::printf("300 MB stream (%s) between prefetch and Wo: stream %.1f us (%.0f GB/s); Wo after %.1f us\n",
                evictFirst ? "__ldcs" : "__ldg", st, expertBytes / st / 1e3, after);
  }
  return 0;
}
