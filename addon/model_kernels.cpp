#include "addon/model_kernels.h"

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string>
#include <system_error>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/stream.h"
#include "addon/thread_state.h"
#include "cu/model.h"

namespace memra {

namespace {

// Every element a kernel may index, and every flat weight index, stays below 2^53: JS passes
// them as doubles, and the oracle's indices are safe integers.
constexpr unsigned __int128 kSafeLimit = static_cast<unsigned __int128>(1) << 53;

// A shape that cannot be (rows overlapping, a limit passed): a RangeError naming the function.
[[noreturn]] void ThrowShape(Napi::Env env, const char* fn, const std::string& what) {
  throw Napi::RangeError::New(env, std::string(fn) + ": " + what);
}

std::string Num(uint64_t v) { return std::to_string(v); }

// The batch: 1 .. MEMRA_MODEL_MAX_ROWS rows.
uint32_t Rows(const Napi::CallbackInfo& info, size_t i, const char* fn) {
  return static_cast<uint32_t>(ReadIntInRange(info, i, fn, "t", 1, MEMRA_MODEL_MAX_ROWS));
}

// Experts per token, as the router and the expert kernels take it.
uint32_t TopK(const Napi::CallbackInfo& info, size_t i, const char* fn) {
  return static_cast<uint32_t>(ReadIntInRange(info, i, fn, "K", 1, MEMRA_MODEL_MAX_TOPK));
}

// `what` = a * b * ... must stay below 2^53 elements.
void RequireSafeProduct(Napi::Env env, const char* fn, const char* what,
                        std::initializer_list<uint64_t> factors) {
  unsigned __int128 p = 1;
  for (uint64_t f : factors) {
    p *= f;
    if (p >= kSafeLimit) {
      ThrowShape(env, fn, std::string(what) + " must hold fewer than 2^53 elements");
    }
  }
}

// A u64 seed as decimal digits: a double cannot carry all 64 bits.
uint64_t ReadSeed(const Napi::CallbackInfo& info, size_t i, const char* fn) {
  const char* what = "a u64 as a decimal string (digits only, at most 18446744073709551615)";
  if (!info[i].IsString()) ThrowArgError(info.Env(), fn, "seed", what, info[i]);
  const std::string s = info[i].As<Napi::String>().Utf8Value();
  uint64_t v = 0;
  const auto res = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size()) {
    ThrowArgError(info.Env(), fn, "seed", what, info[i]);
  }
  return v;
}

// The optional boolean after a step kernel's stream: whether its launch may overlap the kernel
// before it on the stream (memra_model_set_pdl, cu/pdl.cuh), for this one call.
class PdlScope {
 public:
  PdlScope(const Napi::CallbackInfo& info, size_t i, const char* fn)
      : was_(memra_model_set_pdl(info.Length() > i && !info[i].IsUndefined() &&
                                 ReadBool(info, i, fn, "pdl"))) {}
  ~PdlScope() { memra_model_set_pdl(was_); }
  PdlScope(const PdlScope&) = delete;
  PdlScope& operator=(const PdlScope&) = delete;

 private:
  int was_;
};

Napi::Value ModelMaxRows(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), MEMRA_MODEL_MAX_ROWS);
}

Napi::Value LaunchGenWeights(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchGenWeights";
  uint16_t* dst = Bf16(info, 0, fn, "dst");
  const uint64_t seed = ReadSeed(info, 1, fn);
  const uint64_t id = ReadSafeUint(info, 2, fn, "id");
  const uint64_t base = ReadSafeUint(info, 3, fn, "base");
  const uint64_t rows = ReadSafeUint(info, 4, fn, "rows");
  const uint64_t srcCols = ReadSafeUint(info, 5, fn, "srcCols");
  const uint64_t colStart = ReadSafeUint(info, 6, fn, "colStart");
  const uint64_t cols = ReadSafeUint(info, 7, fn, "cols");
  const int kind = static_cast<int>(ReadIntInRange(info, 8, fn, "kind", 0, 1));
  const double scale = ReadNumber(info, 9, fn, "scale");
  // weights.ts multiplies by the f32 scale; any other double would be rounded here first and
  // silently generate a different tensor. A gain has no scale (the oracle's is NaN).
  if (kind == 0 &&
      (!std::isfinite(scale) || static_cast<double>(static_cast<float>(scale)) != scale)) {
    ThrowArgError(env, fn, "scale",
                  "a finite f32 value (Math.fround(scale) === scale) for kind 0", info[9]);
  }
  if (rows != 0 && cols != 0) {
    if (colStart + cols > srcCols) {
      ThrowShape(env, fn, "colStart + cols (" + Num(colStart) + " + " + Num(cols) +
                              ") must be <= srcCols (" + Num(srcCols) +
                              "): the slice must lie inside a source row");
    }
    const unsigned __int128 last = static_cast<unsigned __int128>(base) +
                                   static_cast<unsigned __int128>(rows - 1) * srcCols +
                                   colStart + cols - 1;
    if (last >= kSafeLimit) {
      ThrowShape(env, fn, "the slice's last flat index (base + (rows-1)*srcCols + colStart + "
                          "cols - 1) must be below 2^53");
    }
    RequireSafeProduct(env, fn, "the slice (rows x cols)", {rows, cols, 2});
  }
  cudaStream_t s;
  const int device = Bound(env, info, 10, fn, &s);
  MEMRA_CUDA_CHECK(env, device,
                   memra_gen_weights(dst, seed, id, base, rows, srcCols, colStart, cols, kind,
                                     static_cast<float>(scale), s),
                   std::string(fn) + "(dst=" + Hex(dst) + ", id=" + Num(id) + ", base=" +
                       Num(base) + ", rows=" + Num(rows) + ", srcCols=" + Num(srcCols) +
                       ", colStart=" + Num(colStart) + ", cols=" + Num(cols) +
                       ", kind=" + std::to_string(kind) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchSetI32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchSetI32";
  int32_t* dst = I32(info, 0, fn, "dst");
  if (!info[1].IsArray()) {
    ThrowArgError(env, fn, "values", "an array of i32 values", info[1]);
  }
  const Napi::Array arr = info[1].As<Napi::Array>();
  const uint32_t n = arr.Length();
  if (n > MEMRA_MODEL_MAX_I32_VALUES) {
    ThrowShape(env, fn, "values.length (" + Num(n) + ") must be at most " +
                            std::to_string(MEMRA_MODEL_MAX_I32_VALUES));
  }
  int32_t vals[MEMRA_MODEL_MAX_I32_VALUES] = {};
  for (uint32_t i = 0; i < n; ++i) {
    const Napi::Value v = arr.Get(i);
    const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : std::nan("");
    if (!(d >= -2147483648.0 && d <= 2147483647.0) || std::trunc(d) != d) {
      const std::string name = "values[" + Num(i) + "]";
      ThrowArgError(env, fn, name.c_str(), "an integer in [-2147483648, 2147483647]", v);
    }
    vals[i] = static_cast<int32_t>(d);
  }
  cudaStream_t s;
  const int device = Bound(env, info, 2, fn, &s);
  const PdlScope pdl(info, 3, fn);
  MEMRA_CUDA_CHECK(env, device, memra_set_i32(dst, n, vals, s),
                   std::string(fn) + "(dst=" + Hex(dst) + ", n=" + Num(n) + ", stream=" + Hex(s) +
                       ")");
  return env.Undefined();
}

Napi::Value LaunchEmbed(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchEmbed";
  float* out = F32(info, 0, fn, "out");
  const uint16_t* emb = Bf16(info, 1, fn, "emb");
  const int32_t* tokens = I32(info, 2, fn, "tokens");
  const uint32_t t = Rows(info, 3, fn);
  const uint32_t H = ReadU32(info, 4, fn, "H");
  const uint32_t V = ReadU32(info, 5, fn, "V");
  RequireSafeProduct(env, fn, "Emb (V x H)", {V, H, 2});
  cudaStream_t s;
  const int device = Bound(env, info, 6, fn, &s);
  const PdlScope pdl(info, 7, fn);
  MEMRA_CUDA_CHECK(env, device, memra_embed(out, emb, tokens, t, H, V, s),
                   std::string(fn) + "(out=" + Hex(out) + ", emb=" + Hex(emb) + ", t=" + Num(t) +
                       ", H=" + Num(H) + ", V=" + Num(V) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchRmsnorm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchRmsnorm";
  float* out = F32(info, 0, fn, "out");
  const float* in = F32(info, 1, fn, "input");
  const uint16_t* gain = Bf16(info, 2, fn, "gain");
  const uint32_t t = Rows(info, 3, fn);
  // The mean divides by H as an f32, exact only up to 2^24.
  const uint32_t H = static_cast<uint32_t>(ReadIntInRange(info, 4, fn, "H", 0, 1 << 24));
  cudaStream_t s;
  const int device = Bound(env, info, 5, fn, &s);
  const PdlScope pdl(info, 6, fn);
  MEMRA_CUDA_CHECK(env, device, memra_rmsnorm(out, in, gain, t, H, s),
                   std::string(fn) + "(out=" + Hex(out) + ", input=" + Hex(in) + ", t=" + Num(t) +
                       ", H=" + Num(H) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchGemv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchGemv";
  float* out = F32(info, 0, fn, "out");
  const uint64_t ldo = ReadSafeUint(info, 1, fn, "ldo");
  const float* x = F32(info, 2, fn, "x");
  const uint64_t ldx = ReadSafeUint(info, 3, fn, "ldx");
  const uint16_t* w = Bf16(info, 4, fn, "w");
  const uint64_t ldw = ReadSafeUint(info, 5, fn, "ldw");
  const uint32_t K = ReadU32(info, 6, fn, "K");
  const uint32_t cols = ReadU32(info, 7, fn, "cols");
  const uint32_t t = Rows(info, 8, fn);
  const bool accumulate = ReadBool(info, 9, fn, "accumulate");
  const uint32_t split = static_cast<uint32_t>(ReadIntInRange(info, 10, fn, "split", 0, 8));
  if (cols > ldw) {
    ThrowShape(env, fn, "cols (" + Num(cols) + ") must be <= ldw (" + Num(ldw) +
                            "): W's rows would overlap");
  }
  if (K > ldx) {
    ThrowShape(env, fn, "K (" + Num(K) + ") must be <= ldx (" + Num(ldx) +
                            "): x's rows would overlap");
  }
  if (cols > ldo) {
    ThrowShape(env, fn, "cols (" + Num(cols) + ") must be <= ldo (" + Num(ldo) +
                            "): output rows would overlap");
  }
  RequireSafeProduct(env, fn, "W (K x ldw)", {K, ldw, 2});
  RequireSafeProduct(env, fn, "x (t x ldx)", {t, ldx, 4});
  RequireSafeProduct(env, fn, "out (t x ldo)", {t, ldo, 4});
  cudaStream_t s;
  const int device = Bound(env, info, 11, fn, &s);
  const PdlScope pdl(info, 12, fn);
  MEMRA_CUDA_CHECK(env, device, memra_gemv(out, ldo, x, ldx, w, ldw, K, cols, t, accumulate ? 1 : 0, split, s),
                   std::string(fn) + "(out=" + Hex(out) + ", ldo=" + Num(ldo) + ", x=" + Hex(x) +
                       ", ldx=" + Num(ldx) + ", w=" + Hex(w) + ", ldw=" + Num(ldw) +
                       ", K=" + Num(K) + ", cols=" + Num(cols) + ", t=" + Num(t) +
                       ", accumulate=" + (accumulate ? "true" : "false") + ", split=" + Num(split) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchLatentQuery(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchLatentQuery";
  float* q = F32(info, 0, fn, "q");
  const float* a = F32(info, 1, fn, "a");
  const uint16_t* wdkv = Bf16(info, 2, fn, "wdkv");
  const uint16_t* wq = Bf16(info, 3, fn, "wq");
  float* cache = F32(info, 4, fn, "cache");
  const uint64_t slotStride = ReadSafeUint(info, 5, fn, "slotStride");
  const int32_t* pos = I32(info, 6, fn, "pos");
  const uint32_t K = ReadU32(info, 7, fn, "K");
  const uint32_t R = ReadU32(info, 8, fn, "R");
  const uint32_t qcols = ReadU32(info, 9, fn, "qcols");
  const uint32_t t = Rows(info, 10, fn);
  const uint32_t P = ReadU32(info, 11, fn, "P");
  if (slotStride < uint64_t(P) * R) {
    ThrowShape(env, fn, "slotStride (" + Num(slotStride) + ") must be >= P * R (" + Num(P) + " * " +
                            Num(R) + "): one slot's positions would overlap the next");
  }
  RequireSafeProduct(env, fn, "Wq (K x qcols)", {K, qcols, 2});
  RequireSafeProduct(env, fn, "Wdkv (K x R)", {K, R, 2});
  RequireSafeProduct(env, fn, "the cache (t x slotStride)", {t, slotStride, 4});
  cudaStream_t s;
  const int device = Bound(env, info, 12, fn, &s);
  const PdlScope pdl(info, 13, fn);
  MEMRA_CUDA_CHECK(env, device,
                   memra_latent_query(q, a, wdkv, wq, cache, slotStride, pos, K, R, qcols, t, P, s),
                   std::string(fn) + "(q=" + Hex(q) + ", a=" + Hex(a) + ", wdkv=" + Hex(wdkv) +
                       ", wq=" + Hex(wq) + ", cache=" + Hex(cache) + ", K=" + Num(K) + ", R=" + Num(R) +
                       ", qcols=" + Num(qcols) + ", t=" + Num(t) + ", P=" + Num(P) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

void RequireLayer(Napi::Env env, const char* fn, uint32_t layer, uint32_t L) {
  if (layer >= L) {
    ThrowShape(env, fn, "layer (" + Num(layer) + ") must be < L (" + Num(L) + ")");
  }
}

// normOut = rmsnorm(x, gain), then out = normOut @ W (the router's split), in one launch.
Napi::Value LaunchNormGemv(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchNormGemv";
  float* normOut = F32(info, 0, fn, "normOut");
  float* out = F32(info, 1, fn, "out");
  const uint64_t ldo = ReadSafeUint(info, 2, fn, "ldo");
  const float* x = F32(info, 3, fn, "x");
  const uint16_t* gain = Bf16(info, 4, fn, "gain");
  const uint16_t* w = Bf16(info, 5, fn, "w");
  const uint64_t ldw = ReadSafeUint(info, 6, fn, "ldw");
  // The mean divides by K as an f32, exact only up to 2^24.
  const uint32_t K = static_cast<uint32_t>(ReadIntInRange(info, 7, fn, "K", 1, 1 << 24));
  const uint32_t cols = static_cast<uint32_t>(ReadIntInRange(info, 8, fn, "cols", 1, MEMRA_MODEL_NORM_GEMV_MAX_COLS));
  const uint32_t t = Rows(info, 9, fn);
  if (cols > ldw) {
    ThrowShape(env, fn, "cols (" + Num(cols) + ") must be <= ldw (" + Num(ldw) + "): W's rows would overlap");
  }
  if (cols > ldo) {
    ThrowShape(env, fn, "cols (" + Num(cols) + ") must be <= ldo (" + Num(ldo) + "): output rows would overlap");
  }
  RequireSafeProduct(env, fn, "W (K x ldw)", {K, ldw, 2});
  RequireSafeProduct(env, fn, "x (t x K)", {t, K, 4});
  RequireSafeProduct(env, fn, "out (t x ldo)", {t, ldo, 4});
  cudaStream_t s;
  const int device = Bound(env, info, 10, fn, &s);
  const PdlScope pdl(info, 11, fn);
  MEMRA_CUDA_CHECK(env, device, memra_norm_gemv(normOut, out, ldo, x, gain, w, ldw, K, cols, t, s),
                   std::string(fn) + "(normOut=" + Hex(normOut) + ", out=" + Hex(out) + ", ldo=" + Num(ldo) +
                       ", x=" + Hex(x) + ", w=" + Hex(w) + ", ldw=" + Num(ldw) + ", K=" + Num(K) +
                       ", cols=" + Num(cols) + ", t=" + Num(t) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchCacheWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchCacheWrite";
  float* cache = F32(info, 0, fn, "cache");
  const float* c = F32(info, 1, fn, "c");
  const int32_t* pos = I32(info, 2, fn, "pos");
  const uint32_t t = Rows(info, 3, fn);
  const uint32_t layer = ReadU32(info, 4, fn, "layer");
  const uint32_t L = ReadU32(info, 5, fn, "L");
  const uint32_t P = ReadU32(info, 6, fn, "P");
  const uint32_t R = ReadU32(info, 7, fn, "R");
  RequireLayer(env, fn, layer, L);
  RequireSafeProduct(env, fn, "the cache (t x L x P x R)", {t, L, P, R, 4});
  cudaStream_t s;
  const int device = Bound(env, info, 8, fn, &s);
  const PdlScope pdl(info, 9, fn);
  MEMRA_CUDA_CHECK(env, device, memra_cache_write(cache, c, pos, t, layer, L, P, R, s),
                   std::string(fn) + "(cache=" + Hex(cache) + ", c=" + Hex(c) + ", t=" + Num(t) +
                       ", layer=" + Num(layer) + ", L=" + Num(L) + ", P=" + Num(P) +
                       ", R=" + Num(R) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchMlaAttention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchMlaAttention";
  MemraMlaArgs a{};
  a.u = F32(info, 0, fn, "u");
  a.ldu = ReadSafeUint(info, 1, fn, "ldu");
  a.q = F32(info, 2, fn, "q");
  a.ldq = ReadSafeUint(info, 3, fn, "ldq");
  a.cache = F32(info, 4, fn, "cache");
  a.slotStride = ReadSafeUint(info, 5, fn, "slotStride");
  a.pos = I32(info, 6, fn, "pos");
  a.wuv = Bf16(info, 7, fn, "wuv");
  a.work = reinterpret_cast<float*>(ReadAlignedAddress(info, 8, fn, "work", 16, "the workspace"));
  a.t = Rows(info, 9, fn);
  a.nh = static_cast<uint32_t>(ReadIntInRange(info, 10, fn, "nh", 0, INT32_MAX));
  a.P = static_cast<uint32_t>(ReadIntInRange(info, 11, fn, "P", 1, MEMRA_MODEL_MAX_POSITIONS));
  a.R = static_cast<uint32_t>(ReadIntInRange(info, 12, fn, "R", 1, MEMRA_MODEL_MAX_LATENT));
  a.Dv = ReadU32(info, 13, fn, "Dv");
  if (a.R % 16 != 0) {
    ThrowShape(env, fn, "R (" + Num(a.R) + ") must be a multiple of 16: a position's score is four lanes' sums of " +
                            "R / 16 float4s");
  }
  if (uint64_t(a.nh) * a.R > a.ldq) {
    ThrowShape(env, fn, "nh * R (" + Num(a.nh) + " * " + Num(a.R) + ") must be <= ldq (" +
                            Num(a.ldq) + "): a row of q holds the nh heads' R-wide queries");
  }
  if (uint64_t(a.nh) * a.Dv > a.ldu) {
    ThrowShape(env, fn, "nh * Dv (" + Num(a.nh) + " * " + Num(a.Dv) + ") must be <= ldu (" +
                            Num(a.ldu) + "): a row of u holds the nh heads' Dv-wide outputs");
  }
  if (a.slotStride < uint64_t(a.P) * a.R) {
    ThrowShape(env, fn, "slotStride (" + Num(a.slotStride) + ") must be >= P * R (" + Num(a.P) +
                            " * " + Num(a.R) + "): one slot's positions would overlap the next");
  }
  RequireSafeProduct(env, fn, "the cache (t x slotStride)", {a.t, a.slotStride, 4});
  RequireSafeProduct(env, fn, "Wuv (nh x R x Dv)", {a.nh, a.R, a.Dv, 2});
  RequireSafeProduct(env, fn, "u (t x ldu)", {a.t, a.ldu, 4});
  RequireSafeProduct(env, fn, "q (t x ldq)", {a.t, a.ldq, 4});
  cudaStream_t s;
  const int device = Bound(env, info, 14, fn, &s);
  const PdlScope pdl(info, 15, fn);
  MEMRA_CUDA_CHECK(env, device, memra_mla_attention(&a, s),
                   std::string(fn) + "(u=" + Hex(a.u) + ", q=" + Hex(a.q) + ", cache=" +
                       Hex(a.cache) + ", slotStride=" + Num(a.slotStride) + ", work=" +
                       Hex(a.work) + ", t=" + Num(a.t) + ", nh=" + Num(a.nh) + ", P=" + Num(a.P) +
                       ", R=" + Num(a.R) + ", Dv=" + Num(a.Dv) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

// Bytes of memra_mla_attention's workspace for (t, nh, P, R): the walk allocates it.
Napi::Value MlaWorkspaceBytes(const Napi::CallbackInfo& info) {
  const char* fn = "mlaWorkspaceBytes";
  const uint32_t t = Rows(info, 0, fn);
  const uint32_t nh = static_cast<uint32_t>(ReadIntInRange(info, 1, fn, "nh", 0, INT32_MAX));
  const uint32_t P =
      static_cast<uint32_t>(ReadIntInRange(info, 2, fn, "P", 1, MEMRA_MODEL_MAX_POSITIONS));
  const uint32_t R =
      static_cast<uint32_t>(ReadIntInRange(info, 3, fn, "R", 1, MEMRA_MODEL_MAX_LATENT));
  return Napi::Number::New(info.Env(), static_cast<double>(memra_mla_workspace_bytes(t, nh, P, R)));
}

// The P up to which memra_mla_attention is one kernel, for latent width R: the walk passes it as
// P when every row's position is below it.
Napi::Value MlaShortPositions(const Napi::CallbackInfo& info) {
  const char* fn = "mlaShortPositions";
  const uint32_t R =
      static_cast<uint32_t>(ReadIntInRange(info, 0, fn, "R", 1, MEMRA_MODEL_MAX_LATENT));
  return Napi::Number::New(info.Env(), static_cast<double>(memra_mla_short_positions(R)));
}

Napi::Value LaunchRouter(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchRouter";
  int32_t* ids = I32(info, 0, fn, "ids");
  float* wts = F32(info, 1, fn, "wts");
  const float* logits = F32(info, 2, fn, "logits");
  const uint32_t t = Rows(info, 3, fn);
  const uint32_t E =
      static_cast<uint32_t>(ReadIntInRange(info, 4, fn, "E", 1, MEMRA_MODEL_MAX_EXPERTS));
  const uint32_t K = TopK(info, 5, fn);
  if (K > E) ThrowShape(env, fn, "K (" + Num(K) + ") must be <= E (" + Num(E) + ")");
  cudaStream_t s;
  const int device = Bound(env, info, 6, fn, &s);
  const PdlScope pdl(info, 7, fn);
  MEMRA_CUDA_CHECK(env, device, memra_router(ids, wts, logits, t, E, K, s),
                   std::string(fn) + "(ids=" + Hex(ids) + ", logits=" + Hex(logits) +
                       ", t=" + Num(t) + ", E=" + Num(E) + ", K=" + Num(K) +
                       ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

// H for the fp8 kernels: whole 128-wide blocks.
uint32_t QuantWidth(const Napi::CallbackInfo& info, size_t i, const char* fn) {
  const uint32_t H = ReadU32(info, i, fn, "H");
  if (H % MEMRA_MODEL_QUANT_BLOCK != 0) {
    ThrowShape(info.Env(), fn, "H (" + Num(H) + ") must be a multiple of " +
                                   std::to_string(MEMRA_MODEL_QUANT_BLOCK) +
                                   " (the fp8 scale block)");
  }
  return H;
}

Napi::Value LaunchQuantize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchQuantize";
  uint8_t* xq = U8(info, 0, fn, "xq");
  float* xs = F32(info, 1, fn, "xs");
  const float* b = F32(info, 2, fn, "b");
  const uint32_t t = Rows(info, 3, fn);
  const uint32_t H = QuantWidth(info, 4, fn);
  cudaStream_t s;
  const int device = Bound(env, info, 5, fn, &s);
  const PdlScope pdl(info, 6, fn);
  MEMRA_CUDA_CHECK(env, device, memra_quantize(xq, xs, b, t, H, s),
                   std::string(fn) + "(xq=" + Hex(xq) + ", xs=" + Hex(xs) + ", b=" + Hex(b) +
                       ", t=" + Num(t) + ", H=" + Num(H) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchRouteQuant(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchRouteQuant";
  int32_t* ids = I32(info, 0, fn, "ids");
  float* wts = F32(info, 1, fn, "wts");
  const float* logits = F32(info, 2, fn, "logits");
  uint8_t* xq = U8(info, 3, fn, "xq");
  float* xs = F32(info, 4, fn, "xs");
  float* xd = F32(info, 5, fn, "xd");
  const float* b = F32(info, 6, fn, "b");
  const uint32_t t = Rows(info, 7, fn);
  const uint32_t E =
      static_cast<uint32_t>(ReadIntInRange(info, 8, fn, "E", 1, MEMRA_MODEL_MAX_EXPERTS));
  const uint32_t K = TopK(info, 9, fn);
  const uint32_t H = QuantWidth(info, 10, fn);
  if (K > E) ThrowShape(env, fn, "K (" + Num(K) + ") must be <= E (" + Num(E) + ")");
  cudaStream_t s;
  const int device = Bound(env, info, 11, fn, &s);
  const PdlScope pdl(info, 12, fn);
  MEMRA_CUDA_CHECK(env, device, memra_route_quant(ids, wts, logits, xq, xs, xd, b, t, E, K, H, s),
                   std::string(fn) + "(ids=" + Hex(ids) + ", logits=" + Hex(logits) + ", xq=" + Hex(xq) +
                       ", xd=" + Hex(xd) + ", b=" + Hex(b) + ", t=" + Num(t) + ", E=" + Num(E) +
                       ", K=" + Num(K) + ", H=" + Num(H) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchDequantize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchDequantize";
  float* xd = F32(info, 0, fn, "xd");
  const uint8_t* xq = U8(info, 1, fn, "xq");
  const float* xs = F32(info, 2, fn, "xs");
  const uint32_t t = Rows(info, 3, fn);
  const uint32_t H = QuantWidth(info, 4, fn);
  cudaStream_t s;
  const int device = Bound(env, info, 5, fn, &s);
  const PdlScope pdl(info, 6, fn);
  MEMRA_CUDA_CHECK(env, device, memra_dequantize(xd, xq, xs, t, H, s),
                   std::string(fn) + "(xd=" + Hex(xd) + ", xq=" + Hex(xq) + ", xs=" + Hex(xs) +
                       ", t=" + Num(t) + ", H=" + Num(H) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

// The expert launchers' shared arguments, in this order: the rank's expert range [e0, e0 + nE),
// the rows t, the slots K and the dimensions H and F. The matrices hold nE experts of H x F.
struct ExpertShape {
  uint32_t e0, nE, t, K, H, F;
  std::string Describe() const {
    return "e0=" + Num(e0) + ", nE=" + Num(nE) + ", t=" + Num(t) + ", K=" + Num(K) + ", H=" + Num(H) +
           ", F=" + Num(F);
  }
};

ExpertShape ReadExpertShape(const Napi::CallbackInfo& info, size_t i, const char* fn) {
  ExpertShape e{};
  e.e0 = ReadU32(info, i, fn, "e0");
  e.nE = ReadU32(info, i + 1, fn, "nE");
  e.t = Rows(info, i + 2, fn);
  e.K = TopK(info, i + 3, fn);
  e.H = ReadU32(info, i + 4, fn, "H");
  e.F = ReadU32(info, i + 5, fn, "F");
  RequireSafeProduct(info.Env(), fn, "the experts (nE x H x F)", {e.nE, e.H, e.F, 2});
  return e;
}

Napi::Value LaunchExpertUp(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchExpertUp";
  float* act = F32(info, 0, fn, "act");
  const float* xd = F32(info, 1, fn, "xd");
  const int32_t* ids = I32(info, 2, fn, "ids");
  const uint16_t* w1 = Bf16(info, 3, fn, "w1");
  const uint16_t* w3 = Bf16(info, 4, fn, "w3");
  const ExpertShape e = ReadExpertShape(info, 5, fn);
  cudaStream_t s;
  const int device = Bound(env, info, 11, fn, &s);
  const PdlScope pdl(info, 12, fn);
  unsigned* sync = ThreadState::Of(env).expertSync;
  MEMRA_CUDA_CHECK(env, device, memra_expert_up(act, xd, ids, w1, w3, e.e0, e.nE, e.t, e.K, e.H, e.F, sync, s),
                   std::string(fn) + "(act=" + Hex(act) + ", xd=" + Hex(xd) + ", w1=" + Hex(w1) +
                       ", w3=" + Hex(w3) + ", " + e.Describe() + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchExpertDown(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchExpertDown";
  float* contrib = F32(info, 0, fn, "contrib");
  const float* act = F32(info, 1, fn, "act");
  const int32_t* ids = I32(info, 2, fn, "ids");
  const uint16_t* w2 = Bf16(info, 3, fn, "w2");
  const ExpertShape e = ReadExpertShape(info, 4, fn);
  cudaStream_t s;
  const int device = Bound(env, info, 10, fn, &s);
  const PdlScope pdl(info, 11, fn);
  unsigned* sync = ThreadState::Of(env).expertSync;
  MEMRA_CUDA_CHECK(env, device, memra_expert_down(contrib, act, ids, w2, e.e0, e.nE, e.t, e.K, e.H, e.F, sync, s),
                   std::string(fn) + "(contrib=" + Hex(contrib) + ", act=" + Hex(act) +
                       ", w2=" + Hex(w2) + ", " + e.Describe() + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

// memra_moe_combine's arguments, at info[0..8] for both merge launches.
struct MergeArgs {
  float* h;
  const float* wts;
  const int32_t* ids;
  const float* lo;
  const float* hi;
  uint32_t splitE, t, K, H;
  std::string Describe() const {
    return "h=" + Hex(h) + ", lo=" + Hex(lo) + ", hi=" + Hex(hi) + ", splitE=" + Num(splitE) +
           ", t=" + Num(t) + ", K=" + Num(K) + ", H=" + Num(H);
  }
};

MergeArgs ReadMerge(const Napi::CallbackInfo& info, const char* fn) {
  return {F32(info, 0, fn, "h"),         F32(info, 1, fn, "wts"), I32(info, 2, fn, "ids"),
          F32(info, 3, fn, "lo"),        F32(info, 4, fn, "hi"),  ReadU32(info, 5, fn, "splitE"),
          Rows(info, 6, fn),             TopK(info, 7, fn),       ReadU32(info, 8, fn, "H")};
}

Napi::Value LaunchMoeCombine(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchMoeCombine";
  const MergeArgs m = ReadMerge(info, fn);
  cudaStream_t s;
  const int device = Bound(env, info, 9, fn, &s);
  const PdlScope pdl(info, 10, fn);
  MEMRA_CUDA_CHECK(env, device,
                   memra_moe_combine(m.h, m.wts, m.ids, m.lo, m.hi, m.splitE, m.t, m.K, m.H, s),
                   std::string(fn) + "(" + m.Describe() + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

// The merge, then out = rmsnorm(h, gain) in one launch.
Napi::Value LaunchMoeCombineNorm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchMoeCombineNorm";
  const MergeArgs m = ReadMerge(info, fn);
  float* out = F32(info, 9, fn, "out");
  const uint16_t* gain = Bf16(info, 10, fn, "gain");
  cudaStream_t s;
  const int device = Bound(env, info, 11, fn, &s);
  const PdlScope pdl(info, 12, fn);
  MEMRA_CUDA_CHECK(env, device,
                   memra_moe_combine_norm(m.h, m.wts, m.ids, m.lo, m.hi, m.splitE, m.t, m.K, m.H,
                                          out, gain, s),
                   std::string(fn) + "(" + m.Describe() + ", out=" + Hex(out) + ", gain=" +
                       Hex(gain) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value LaunchArgmax(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* fn = "launchArgmax";
  int32_t* out = I32(info, 0, fn, "out");
  const float* logits = F32(info, 1, fn, "logits");
  const uint32_t t = Rows(info, 2, fn);
  // Written as an i32 index; a row of none has no answer.
  const uint32_t V = static_cast<uint32_t>(ReadIntInRange(info, 3, fn, "V", 1, INT32_MAX));
  cudaStream_t s;
  const int device = Bound(env, info, 4, fn, &s);
  const PdlScope pdl(info, 5, fn);
  MEMRA_CUDA_CHECK(env, device, memra_argmax(out, logits, t, V, s),
                   std::string(fn) + "(out=" + Hex(out) + ", logits=" + Hex(logits) +
                       ", t=" + Num(t) + ", V=" + Num(V) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

}  // namespace

void RegisterModelKernels(Napi::Env env, Napi::Object exports) {
  const struct {
    const char* name;
    Napi::Value (*fn)(const Napi::CallbackInfo&);
  } fns[] = {
      {"modelMaxRows", ModelMaxRows},
      {"launchGenWeights", LaunchGenWeights},
      {"launchSetI32", LaunchSetI32},
      {"launchEmbed", LaunchEmbed},
      {"launchRmsnorm", LaunchRmsnorm},
      {"launchGemv", LaunchGemv},
      {"launchNormGemv", LaunchNormGemv},
      {"launchCacheWrite", LaunchCacheWrite},
      {"launchLatentQuery", LaunchLatentQuery},
      {"launchMlaAttention", LaunchMlaAttention},
      {"mlaWorkspaceBytes", MlaWorkspaceBytes},
      {"mlaShortPositions", MlaShortPositions},
      {"launchRouter", LaunchRouter},
      {"launchQuantize", LaunchQuantize},
      {"launchDequantize", LaunchDequantize},
      {"launchRouteQuant", LaunchRouteQuant},
      {"launchExpertUp", LaunchExpertUp},
      {"launchExpertDown", LaunchExpertDown},
      {"launchMoeCombine", LaunchMoeCombine},
      {"launchMoeCombineNorm", LaunchMoeCombineNorm},
      {"launchArgmax", LaunchArgmax},
  };
  for (const auto& f : fns) exports.Set(f.name, Napi::Function::New(env, f.fn, f.name));
}

}  // namespace memra
