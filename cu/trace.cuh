// A block's timeline, in a build with -DMEMRA_TRACE only (scripts/probes/step-timeline-probe.cu):
// when the block became resident, when its first PdlWait() returned (the kernel ahead complete and
// its stores visible), when its thread 0 passed each of up to kTraceMarks marks in the kernel
// (MEMRA_TRACE_MARK: its phases), and when thread 0 left, one record a block. Under programmatic
// dependent launch the kernel table's event pairs cannot see this: an event between two kernels
// stops the next one from starting early, which is the overlap being measured.
//
// Without MEMRA_TRACE every macro is empty and every kernel is what the addon ships.
#pragma once

// Marks a traced block records (MEMRA_TRACE_MARK's argument is below it). 4 and 5 are GemvTile's
// (cu/gemv_tile.cuh: every partial stored; the blocks' totals met), 2 and 3 ClusterSum's
// (cu/model_norm.cuh: the warp totals met; read); a kernel's own phases take the others, or all
// six where it has neither (mla_short).
constexpr unsigned kTraceMarks = 6;

#ifdef MEMRA_TRACE
#include <stdint.h>

#include "cu/globaltimer.cuh"

struct MemraTraceRecord {
  uint64_t entry, waited, exit;  // %globaltimer ns; waited 0: the block never waited
  uint64_t marks[kTraceMarks];   // 0: not passed
  uint32_t tag, block, smid, blocks;
};

// Each translation unit has its own copies (no relocatable device code: with -rdc=true the
// products' static shared memory came out past 48 KB at link time) and hands their host handles to
// the program reading them, MemraTraceRegister (the probe), which gives each its own buffer and
// zeroes its count between replays.
static __device__ MemraTraceRecord* memraTraceRecords;
static __device__ unsigned memraTraceCapacity;
static __device__ unsigned memraTraceCount;
void MemraTraceRegister(const void* records, const void* capacity, const void* count);
static const int memraTraceRegistered =
    (MemraTraceRegister(&memraTraceRecords, &memraTraceCapacity, &memraTraceCount), 0);

// Thread 0's first wait of this block and its marks; reset by each block's Block.
static __shared__ uint64_t memraTraceWaited;
static __shared__ uint64_t memraTraceMarks[kTraceMarks];

namespace memra_trace {

__device__ __forceinline__ bool Thread0() { return threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0; }

// Constructed first thing in a kernel; its destructor, at thread 0's return, stores the record.
struct Block {
  uint32_t tag;
  uint64_t entry = 0;
  __device__ explicit Block(uint32_t t) : tag(t) {
    if (!Thread0()) return;
    entry = GlobalTimerNs();
    memraTraceWaited = 0;
    for (unsigned m = 0; m < kTraceMarks; ++m) memraTraceMarks[m] = 0;
  }
  __device__ ~Block() {
    if (!Thread0()) return;
    const uint64_t exit = GlobalTimerNs();
    uint32_t smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    const unsigned i = atomicAdd(&memraTraceCount, 1u);
    if (i >= memraTraceCapacity) return;
    const uint32_t block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    MemraTraceRecord& r = memraTraceRecords[i];
    r.entry = entry, r.waited = memraTraceWaited, r.exit = exit;
    for (unsigned m = 0; m < kTraceMarks; ++m) r.marks[m] = memraTraceMarks[m];
    r.tag = tag, r.block = block, r.smid = smid, r.blocks = gridDim.x * gridDim.y * gridDim.z;
  }
};

__device__ __forceinline__ void Waited() {
  if (Thread0() && memraTraceWaited == 0) memraTraceWaited = GlobalTimerNs();
}

__device__ __forceinline__ void Mark(unsigned m) {
  if (Thread0() && memraTraceMarks[m] == 0) memraTraceMarks[m] = GlobalTimerNs();
}

}  // namespace memra_trace

#define MEMRA_TRACE_KERNEL(tag) const memra_trace::Block memraTraceBlock_(tag)
#define MEMRA_TRACE_WAITED() memra_trace::Waited()
#define MEMRA_TRACE_MARK(m) memra_trace::Mark(m)
#else
#define MEMRA_TRACE_KERNEL(tag) ((void)0)
#define MEMRA_TRACE_WAITED() ((void)0)
#define MEMRA_TRACE_MARK(m) ((void)0)
#endif

// The tags of the traced kernels, as the probe names them.
enum MemraTraceTag : unsigned {
  kTraceLatentQuery = 1,
  kTraceMlaShort,
  kTraceMlaTiles,
  kTraceMlaCombine,
  kTraceGemv,
  kTraceNormGemv,
  kTraceRouteQuant,
  kTraceExpertUp,
  kTraceExpertDown,
  kTraceCombineNorm,
  kTraceRmsnorm,
};
