// Launchers for the kernels in cu/. Each enqueues on `stream` and returns cudaGetLastError(),
// so a bad configuration is reported at the call. A zero count launches nothing and returns
// cudaSuccess (a zero-block grid would be a launch error). Arguments are validated by the
// caller (addon/kernels.cpp): pointers non-null and 4-byte aligned.
#pragma once

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t memra_launch_fill_f32(float* ptr, uint64_t n, float value, cudaStream_t stream);
cudaError_t memra_launch_axpy_f32(float* y, const float* x, uint64_t n, float a,
                                  cudaStream_t stream);
// One thread: a system-scope release store of `value` into `counter` (mapped host memory),
// ordered after all earlier work on the stream.
cudaError_t memra_launch_signal(unsigned int* counter, unsigned int value, cudaStream_t stream);
// dst[i] = (uint32)(i * 0x9E3779B1) ^ seed, as probePattern in src/runtime/binding.ts.
cudaError_t memra_launch_probe_write(unsigned int* dst, uint64_t n, unsigned int seed,
                                     cudaStream_t stream);
// One thread: *dst = %globaltimer (ns) once the stream's earlier work is done (cu/stamp.cu).
cudaError_t memra_launch_stamp_now(unsigned long long* dst, cudaStream_t stream);
// One thread spinning on %globaltimer for `microseconds`.
cudaError_t memra_launch_spin(uint64_t microseconds, cudaStream_t stream);
// Read `bytes` (rounded down to 16) at p, 16-byte aligned, and nothing else: the HBM read floor
// (cu/read_floor.cu). `sink` (4 bytes) is written only when the data folds to a value no fill
// the bench uses gives.
cudaError_t memra_launch_read_floor(const void* p, uint64_t bytes, uint32_t* sink,
                                    cudaStream_t stream);

// ---- the device barriers' refusal words ----
// A bounded device-side wait of the one-shot (cu/tp_ar.cu) or an LL join (cu/tp_ll_chunks.cuh)
// that outlives its spin bound stores one of these into its rank's i32 refusal word (first refusal
// wins) instead of hanging. ENTRY: the peer never arrived (the one-shot's entry barrier; an LL
// join's values never came). EXIT: the peer never finished (the one-shot's exit barrier; an LL
// twin never acked the epoch that last used these slots). src/runtime/link-constants.ts mirrors
// them, checked against the addon's (linkConstants in src/workers/device-worker.ts) when a link
// opens.
#define MEMRA_REFUSED_ENTRY 40043
#define MEMRA_REFUSED_EXIT 40044

// ---- two-rank TP link kernels (cu/tp_ar.cu, seed 000: the Rust engine's small-message
// all-reduce, docs/architecture.md#terms) ----
// Pointers a kernel stores through or reads may be the peer device's (peer access enabled).

// Bytes of one rank's one-shot signal block (allocate zeroed, 4-byte aligned, keep it).
size_t memra_tp_ar_signal_bytes(void);
// The most blocks memra_tp_ar_1stage takes: the signal block holds that many flag slots.
int memra_tp_ar_max_blocks(void);
// dst[i] = src[i] for i < n f32, by kernel stores (16-byte vectors when both are aligned).
cudaError_t memra_tp_ar_push(const float* src, float* dst, uint64_t n, cudaStream_t stream);
// `rows` rows of `row_len` f32: row r from src + r*src_stride to dst + r*dst_stride (strides in
// elements). Dense rows, or rows = 1, go through memra_tp_ar_push.
cudaError_t memra_tp_ar_push_2d(const float* src, float* dst, uint64_t rows, uint64_t row_len,
                                uint64_t src_stride, uint64_t dst_stride, cudaStream_t stream);
// dst[i] += stage[i] for i < n f32.
cudaError_t memra_tp_ar_fold(float* dst, const float* stage, uint64_t n, cudaStream_t stream);
// One-shot two-rank all-reduce, out[i] = in0[i] + in1[i], synchronised with the peer's launch
// through the two signal blocks (see cu/tp_ar.cu for the protocol). Both ranks pass the same in0,
// in1, n and blocks. A barrier wait past `spin_limit` SM clock ticks stores MEMRA_REFUSED_ENTRY
// (entry) or MEMRA_REFUSED_EXIT (exit) into *err if it is still 0.
typedef struct MemraArOneShotArgs {
  // n f32, nullable: this rank's input, staged by the kernel itself into its own stage (in0 on
  // rank 0, in1 on rank 1) before the entry barrier; null when the caller staged it already.
  const float* x;
  const float* in0;  // n f32: rank 0's stage (the peer's memory on rank 1)
  const float* in1;  // n f32: rank 1's stage (the peer's memory on rank 0)
  // n f32, this rank's; overlaps neither stage (the peer reads both while this rank writes).
  float* out;
  void* self_signal;     // memra_tp_ar_signal_bytes(): this rank's signal block, zeroed once
  void* peer_signal;     // the peer's signal block
  int rank;              // 0 or 1
  uint64_t n;            // elements
  int* err;              // this rank's i32 refusal word
  long long spin_limit;  // SM clock ticks, > 0
  int blocks;            // [1, memra_tp_ar_max_blocks()], the same on both ranks
} MemraArOneShotArgs;
// cudaErrorInvalidValue for a null `args`, a rank outside {0, 1}, blocks outside
// [1, memra_tp_ar_max_blocks()] or a non-positive spin_limit.
cudaError_t memra_tp_ar_1stage(const MemraArOneShotArgs* args, cudaStream_t stream);

// ---- low-latency exchange (cu/tp_ll.cu) ----
// Bytes of one rank's LL state block (each chunk's epoch, and the peer's ack of it); allocate it
// zeroed.
size_t memra_tp_ll_state_bytes(void);
// Epochs whose receive slots are live at once: a receive buffer holds depth x cap 8-byte slots.
unsigned memra_tp_ll_depth(void);
// The most values one LL join may move (the per-chunk state is sized for it).
uint64_t memra_tp_ll_max_values(void);
// One LL join on this rank, as both ways of running it take it (a launch, memra_tp_ll_exchange,
// or a job for the LL server, memra_tp_ll_server_job): optionally copy local_src -> local_dst,
// send send_src into the peer's receive slots, receive the peer's values into recv_dst (or, with
// reduce, the rank-order sum with send_src). rows x row_len elements; dst_stride is the
// destination row stride. The rest is the link's: its receive slots (cap values an epoch), state
// blocks, refusal word and spin bound; `stamp` (nullable) times a profiled join.
typedef struct MemraLlJobArgs {
  int reduce;
  uint64_t rows, row_len;
  const float* send_src;
  const float* local_src;
  float* local_dst;
  float* recv_dst;
  uint64_t dst_stride;
  void* self_recv;
  void* peer_recv;
  uint64_t cap;
  void* self_state;
  void* peer_state;
  int rank;
  int* err;
  long long spin_limit;
  unsigned long long* stamp;
} MemraLlJobArgs;
// Launches `job` (both ranks launch for every join) on at most `max_blocks` blocks (0: the
// kernel's own cap), each looping over its chunks. cudaErrorInvalidValue when the elements
// exceed `cap` slots per epoch, when cap is odd (slots travel in 16-byte pairs) or when a count
// does not fit 32 bits.
cudaError_t memra_tp_ll_exchange(const MemraLlJobArgs* job, int pdl, unsigned max_blocks, cudaStream_t stream);

// The most blocks a launched LL join takes when both ranks share one device (loopback). A join's
// blocks spin until the other rank's half arrives, each holding registers the model kernels
// need (512 threads at 113 to 128 registers leave no room for one LL block beside them): a
// 256-chunk join (the EP return at t = 4 on `bench`) spread over every SM, so the other rank's
// expert kernels ahead of its half found no SM, and the join waited out its spin bound. Its
// refusal left the ranks' epochs apart (the sending rank advanced, the refused one did not), and
// the step's later joins paired wrong, many waiting out their own bound, about a second each:
// the loopback "hang" (docs/reliability.md).
// Sixteen blocks leave every GPC SMs for the other rank's clusters beside both ranks' LL servers
// (sixteen working blocks each, the same count).
#define MEMRA_LL_LOOPBACK_BLOCKS 16u

#ifdef __cplusplus
}
#endif
