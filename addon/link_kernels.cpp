#include "addon/link_kernels.h"

#include <string>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/stream.h"
#include "addon/thread_state.h"
#include "cu/kernels.h"

namespace memra {

namespace {

// Element counts and strides must keep every byte address of a strided reach below 2^53: the
// kernels do their row arithmetic in 64 bits, and a reach past that is a caller's bug whose
// pointer arithmetic would wrap rather than fault.
constexpr uint64_t kMaxF32Elements = (uint64_t{1} << 53) / sizeof(float);

// [a, a + bytesA) and [b, b + bytesB) share a byte.
bool Overlaps(uintptr_t a, uint64_t bytesA, uintptr_t b, uint64_t bytesB) {
  return a < b + bytesB && b < a + bytesA;
}

// Both ranges are `bytes` long. A TypeError: it is a wiring mistake, caught before any launch.
void RequireDisjoint(Napi::Env env, const char* fn, const char* name, uintptr_t p,
                     const char* otherName, uintptr_t other, uint64_t bytes, const char* why) {
  if (bytes != 0 && Overlaps(p, bytes, other, bytes)) {
    ThrowTypeError(env, std::string(fn) + ": argument '" + name + "' (" + Hex(p) +
                            ") overlaps '" + otherName + "' (" + Hex(other) + ") within " +
                            std::to_string(bytes) + " bytes: " + why);
  }
}

Napi::Value ArSignalBytes(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(memra_tp_ar_signal_bytes()));
}

Napi::Value ArMaxBlocks(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), memra_tp_ar_max_blocks());
}

// push (src -> dst) and fold (dst += stage): two f32 buffers of n elements and the stream.
template <typename A, typename B>
Napi::Value LaunchTwoBuffers(const Napi::CallbackInfo& info, const char* fn, const char* nameA, const char* nameB,
                             cudaError_t (*launch)(A*, B*, uint64_t, cudaStream_t)) {
  Napi::Env env = info.Env();
  A* a = F32(info, 0, fn, nameA);
  B* b = F32(info, 1, fn, nameB);
  const uint64_t n = ReadSafeUint(info, 2, fn, "n");
  cudaStream_t s;
  const int device = Bound(env, info, 3, fn, &s);
  MEMRA_CUDA_CHECK(env, device, launch(a, b, n, s),
                   std::string(fn) + "(" + nameA + "=" + Hex(a) + ", " + nameB + "=" + Hex(b) +
                       ", n=" + std::to_string(n) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchPush(const Napi::CallbackInfo& info) {
  return LaunchTwoBuffers(info, "launchPush", "src", "dst", memra_tp_ar_push);
}

Napi::Value LaunchFold(const Napi::CallbackInfo& info) {
  return LaunchTwoBuffers(info, "launchFold", "dst", "stage", memra_tp_ar_fold);
}

Napi::Value LaunchPush2d(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "launchPush2d";
  const float* src = F32(info, 0, fn, "src");
  float* dst = F32(info, 1, fn, "dst");
  const uint64_t rows = ReadSafeUint(info, 2, fn, "rows");
  const uint64_t rowLen = ReadSafeUint(info, 3, fn, "rowLen");
  const uint64_t srcStride = ReadSafeUint(info, 4, fn, "srcStride");
  const uint64_t dstStride = ReadSafeUint(info, 5, fn, "dstStride");
  const auto s = ReadHandle<cudaStream_t>(info, 6, fn, "stream");
  if (rows > 1 && rowLen > 0) {
    // Overlapping destination rows would be written by different threads in no fixed order. A
    // source stride below rowLen (even 0, one row fanned out) only re-reads, so it stays legal.
    if (dstStride < rowLen) {
      ThrowTypeError(env, std::string(fn) + ": argument 'dstStride' must be at least rowLen (" +
                              std::to_string(rowLen) + ") when rows > 1, got " +
                              std::to_string(dstStride) +
                              ": overlapping destination rows would race");
    }
    const uint64_t maxStride = srcStride > dstStride ? srcStride : dstStride;
    if (rowLen > kMaxF32Elements || rows - 1 > (kMaxF32Elements - rowLen) / maxStride) {
      ThrowTypeError(env, std::string(fn) + ": rows=" + std::to_string(rows) +
                              " at stride (src " + std::to_string(srcStride) + ", dst " +
                              std::to_string(dstStride) + ") with rowLen=" +
                              std::to_string(rowLen) + " reaches past 2^53 bytes");
    }
  }
  const int device = RequireBoundStream(env, ts, s, fn);
  MEMRA_CUDA_CHECK(env, device,
                   memra_tp_ar_push_2d(src, dst, rows, rowLen, srcStride, dstStride, s),
                   std::string(fn) + "(src=" + Hex(src) + ", dst=" + Hex(dst) + ", rows=" +
                       std::to_string(rows) + ", rowLen=" + std::to_string(rowLen) +
                       ", srcStride=" + std::to_string(srcStride) + ", dstStride=" +
                       std::to_string(dstStride) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchOneShot(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "launchOneShot";
  // x is optional (0: the caller staged the input already), so it is read as a plain number.
  const double xNumber = info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
  if (!(xNumber == 0 || (xNumber > 0 && xNumber < kTwoPow53 &&
                         xNumber == static_cast<double>(static_cast<uint64_t>(xNumber)) &&
                         static_cast<uint64_t>(xNumber) % 4 == 0))) {
    ThrowArgError(env, fn, "x", "0 or a 4-byte aligned device pointer", info[0]);
  }
  const uintptr_t x = static_cast<uintptr_t>(xNumber);
  const uintptr_t in0 = ReadAlignedAddress(info, 1, fn, "in0", 4, "f32");
  const uintptr_t in1 = ReadAlignedAddress(info, 2, fn, "in1", 4, "f32");
  const uintptr_t out = ReadAlignedAddress(info, 3, fn, "out", 4, "f32");
  const uintptr_t selfSignal = ReadAlignedAddress(info, 4, fn, "selfSignal", 4, "u32 flags");
  const uintptr_t peerSignal = ReadAlignedAddress(info, 5, fn, "peerSignal", 4, "u32 flags");
  const int rank = static_cast<int>(ReadIntInRange(info, 6, fn, "rank", 0, 1));
  const uint64_t n = ReadSafeUint(info, 7, fn, "n");
  const uintptr_t err = ReadAlignedAddress(info, 8, fn, "err", 4, "an i32 refusal word");
  const uint64_t spinLimit = ReadPositiveSafeUint(info, 9, fn, "spinLimit");
  const int blocks =
      static_cast<int>(ReadIntInRange(info, 10, fn, "blocks", 1, memra_tp_ar_max_blocks()));
  const auto s = ReadHandle<cudaStream_t>(info, 11, fn, "stream");

  // The peer reads both inputs for the whole exchange while this rank writes `out`: an `out`
  // over either input hands the peer half-summed operands (the seed's staging note). `out` may
  // alias `x`: each block stages its share of x before it writes the same share of out.
  const uint64_t bytes = n * sizeof(float);
  const char* inPlace = "the peer reads both inputs while this rank writes out; stage the inputs";
  RequireDisjoint(env, fn, "out", out, "in0", in0, bytes, inPlace);
  RequireDisjoint(env, fn, "out", out, "in1", in1, bytes, inPlace);
  if (x != 0) {
    RequireDisjoint(env, fn, "x", x, "in0", in0, bytes, "x is copied into the stages");
    RequireDisjoint(env, fn, "x", x, "in1", in1, bytes, "x is copied into the stages");
  }
  // One block for both ranks would make each rank wait on a flag only it could have written.
  const uint64_t sigBytes = memra_tp_ar_signal_bytes();
  RequireDisjoint(env, fn, "selfSignal", selfSignal, "peerSignal", peerSignal, sigBytes,
                  "each rank needs its own signal block");

  const int device = RequireBoundStream(env, ts, s, fn);
  MemraArOneShotArgs a{};
  a.x = reinterpret_cast<const float*>(x);
  a.in0 = reinterpret_cast<const float*>(in0);
  a.in1 = reinterpret_cast<const float*>(in1);
  a.out = reinterpret_cast<float*>(out);
  a.self_signal = reinterpret_cast<void*>(selfSignal);
  a.peer_signal = reinterpret_cast<void*>(peerSignal);
  a.rank = rank;
  a.n = n;
  a.err = reinterpret_cast<int*>(err);
  a.spin_limit = static_cast<long long>(spinLimit);
  a.blocks = blocks;
  MEMRA_CUDA_CHECK(
      env, device, memra_tp_ar_1stage(&a, s),
      std::string(fn) + "(x=" + Hex(x) + ", in0=" + Hex(in0) + ", in1=" + Hex(in1) + ", out=" + Hex(out) +
          ", selfSignal=" + Hex(selfSignal) + ", peerSignal=" + Hex(peerSignal) + ", rank=" + std::to_string(rank) +
          ", n=" + std::to_string(n) + ", err=" + Hex(err) + ", spinLimit=" + std::to_string(spinLimit) +
          ", blocks=" + std::to_string(blocks) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

// The words a refused device barrier stores (cu/kernels.h), for the TypeScript mirror's check.
Napi::Value RefusalWords(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("entry", Napi::Number::New(env, MEMRA_REFUSED_ENTRY));
  o.Set("exit", Napi::Number::New(env, MEMRA_REFUSED_EXIT));
  return o;
}

}  // namespace

void RegisterLinkKernels(Napi::Env env, Napi::Object exports) {
  exports.Set("arSignalBytes", Napi::Function::New(env, ArSignalBytes, "arSignalBytes"));
  exports.Set("arMaxBlocks", Napi::Function::New(env, ArMaxBlocks, "arMaxBlocks"));
  exports.Set("refusalWords", Napi::Function::New(env, RefusalWords, "refusalWords"));
  exports.Set("launchPush", Napi::Function::New(env, LaunchPush, "launchPush"));
  exports.Set("launchPush2d", Napi::Function::New(env, LaunchPush2d, "launchPush2d"));
  exports.Set("launchFold", Napi::Function::New(env, LaunchFold, "launchFold"));
  exports.Set("launchOneShot", Napi::Function::New(env, LaunchOneShot, "launchOneShot"));
}

}  // namespace memra
