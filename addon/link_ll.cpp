#include "addon/link_ll.h"

#include <string>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/ll_server.h"
#include "addon/stream.h"
#include "addon/thread_state.h"
#include "cu/kernels.h"

namespace memra {

namespace {

// 0 (absent) or an address aligned for what it holds.
uintptr_t ReadOptionalAddress(const Napi::CallbackInfo& info, size_t index, const char* fn,
                              const char* name, uintptr_t alignment, const char* what) {
  if (info[index].IsNumber() && info[index].As<Napi::Number>().DoubleValue() == 0) return 0;
  return ReadAlignedAddress(info, index, fn, name, alignment, what);
}

// 0 (the role is absent: nothing to send, copy or receive) or a 4-byte aligned f32 pointer.
uintptr_t ReadOptionalF32(const Napi::CallbackInfo& info, size_t index, const char* fn,
                          const char* name) {
  return ReadOptionalAddress(info, index, fn, name, 4, "f32 (or 0 for none)");
}

Napi::Value LlStateBytes(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(memra_tp_ll_state_bytes()));
}

Napi::Value LlDepth(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(memra_tp_ll_depth()));
}

Napi::Value LlMaxValues(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(memra_tp_ll_max_values()));
}

// The link's buffers, once per thread (the link sets them again when it grows them).
Napi::Value LlConfigure(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "llConfigure";
  ThreadState::LlLink l;
  l.selfRecv = ReadAlignedAddress(info, 0, fn, "selfRecv", 16, "LL slot pairs");
  l.peerRecv = ReadAlignedAddress(info, 1, fn, "peerRecv", 16, "LL slot pairs");
  l.cap = ReadPositiveSafeUint(info, 2, fn, "cap");
  l.selfState = ReadAlignedAddress(info, 3, fn, "selfState", 4, "LL state");
  l.peerState = ReadAlignedAddress(info, 4, fn, "peerState", 4, "LL state");
  l.rank = static_cast<int>(ReadIntInRange(info, 5, fn, "rank", 0, 1));
  l.err = ReadAlignedAddress(info, 6, fn, "err", 4, "an i32 refusal word");
  l.spinLimit = ReadPositiveSafeUint(info, 7, fn, "spinLimit");
  l.serveIdleNs = ReadSafeUint(info, 8, fn, "serveIdleMicros") * 1000;
  if (l.cap % 2 != 0 || l.cap > 0xffffffffull) {
    ThrowTypeError(env, std::string(fn) + ": argument 'cap' (" + std::to_string(l.cap) +
                            ") must be even (slots travel in 16-byte pairs) and fit 32 bits");
  }
  if (l.serveIdleNs != 0) RequireEagerModuleLoading(env);
  l.set = true;
  ts.ll = l;
  if (ts.llServer) ts.llServer->set_idle_ns(l.serveIdleNs);
  return env.Undefined();
}

// What the LL server has done on this thread: jobs it ran, grids launched for them.
Napi::Value LlServeStats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  Napi::Object o = Napi::Object::New(env);
  const auto num = [&](const char* key, double v) { o.Set(key, Napi::Number::New(env, v)); };
  // No server yet (none asked for, or no eager join served so far): every count is zero.
  const LlServer* server = ts.llServer.get();
  num("jobs", server ? static_cast<double>(server->jobs()) : 0);
  num("launches", server ? static_cast<double>(server->launches()) : 0);
  num("issued", server ? server->issued() : 0);
  num("done", server ? server->done() : 0);
  num("state", server ? server->state() : 0);
  if (server && info.Length() > 0 && info[0].ToBoolean().Value()) {
    MemraLlServerCtl c;
    bool running = false;
    if (server->ReadControl(&c, &running)) {
      num("cmd", c.cmd);
      num("ctlDone", c.done);
      num("ticket", c.ticket);
      num("exitGen", c.exit_gen);
      num("arrived", c.arrived);
    }
    num("generation", server->generation());
    o.Set("gridRunning", Napi::Boolean::New(env, running));
  }
  return o;
}

Napi::Value LaunchLl(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "launchLl";
  if (!ts.ll.set) {
    ThrowError(env, "launchLl: no LL link on this thread: call llConfigure first (open the ll transport)",
               "MEMRA_NO_LL_LINK");
  }
  const ThreadState::LlLink& l = ts.ll;
  const int reduce = static_cast<int>(ReadIntInRange(info, 0, fn, "reduce", 0, 1));
  const uint64_t rows = ReadPositiveSafeUint(info, 1, fn, "rows");
  const uint64_t rowLen = ReadPositiveSafeUint(info, 2, fn, "rowLen");
  const uintptr_t sendSrc = ReadOptionalF32(info, 3, fn, "sendSrc");
  const uintptr_t localSrc = ReadOptionalF32(info, 4, fn, "localSrc");
  const uintptr_t localDst = ReadOptionalF32(info, 5, fn, "localDst");
  const uintptr_t recvDst = ReadOptionalF32(info, 6, fn, "recvDst");
  const uint64_t dstStride = ReadSafeUint(info, 7, fn, "dstStride");
  // 0, or two u64 in device memory the join stores its own start and end times into.
  const uintptr_t stamp = ReadOptionalAddress(info, 8, fn, "stamp", 8, "two u64 (or 0 for none)");
  const auto s = ReadHandle<cudaStream_t>(info, 9, fn, "stream");
  const uint64_t cap = l.cap;

  // Wiring mistakes that would corrupt memory or hang the peer: refused before any launch.
  if (rows > 1 && dstStride < rowLen && (localSrc != 0 || recvDst != 0)) {
    ThrowTypeError(env, std::string(fn) + ": argument 'dstStride' (" + std::to_string(dstStride) +
                            ") is below rowLen (" + std::to_string(rowLen) +
                            "): destination rows would overlap");
  }
  if (localSrc != 0 && localDst == 0) {
    ThrowTypeError(env, std::string(fn) + ": a local copy (localSrc) needs localDst");
  }
  if (reduce && (sendSrc == 0 || recvDst == 0 || rows != 1)) {
    ThrowTypeError(env, std::string(fn) + ": a reduce sends its input (sendSrc), receives into "
                                          "recvDst, and has rows = 1");
  }
  // Compared by division: rows x rowLen of two safe integers can overflow 64 bits.
  if (rows > memra_tp_ll_max_values() / rowLen) {
    ThrowTypeError(env, std::string(fn) + ": rows x rowLen (" + std::to_string(rows) + " x " +
                            std::to_string(rowLen) + ") exceed the " +
                            std::to_string(memra_tp_ll_max_values()) +
                            " values one LL join may move; split the join or use another transport");
  }
  if ((sendSrc != 0 || recvDst != 0) && rows * rowLen > cap) {
    ThrowTypeError(env, std::string(fn) + ": " + std::to_string(rows * rowLen) +
                            " elements exceed the receive buffer's " + std::to_string(cap) +
                            " slots per epoch; reserve a larger link");
  }

  // Ownership only: a served join must not settle the wait of the served join before it (that is
  // the point of deferring it); a launched one settles below.
  const int device = ts.RequireBound(env, fn);
  RequireOwned(env, ts.streams, s, fn, "stream");
  const bool capturing = ts.capturing.count(s) != 0;
  const MemraLlJobArgs job{reduce, rows, rowLen, reinterpret_cast<const float*>(sendSrc),
                           reinterpret_cast<const float*>(localSrc), reinterpret_cast<float*>(localDst),
                           reinterpret_cast<float*>(recvDst), dstStride, reinterpret_cast<void*>(l.selfRecv),
                           reinterpret_cast<void*>(l.peerRecv), cap, reinterpret_cast<void*>(l.selfState),
                           reinterpret_cast<void*>(l.peerState), l.rank, reinterpret_cast<int*>(l.err),
                           static_cast<long long>(l.spinLimit), reinterpret_cast<unsigned long long*>(stamp)};
  // Eagerly, a join that fits goes to the LL server: a stream memory operation instead of a launch
  // (cu/tp_ll_server.h). A capture always takes the kernel: a graph replays without the host.
  if (!capturing && l.serveIdleNs != 0 && memra_tp_ll_server_fits(rows, rowLen) &&
      (!ts.llServer || ts.llServer->Serves(s))) {
    if (!ts.llServer) {
      ts.llServer = LlServer::Create(env, device);
      ts.llServer->set_idle_ns(l.serveIdleNs);
    }
    ts.llServer->Submit(env, job, s);
    return env.Undefined();
  }
  if (ts.llServer) ts.llServer->SettleWait(env, s);
  // In loopback the other rank's kernels share this device's SMs (cu/kernels.h says why the cap).
  const unsigned maxBlocks = ts.loopback ? MEMRA_LL_LOOPBACK_BLOCKS : 0;
  // Programmatic dependent launch only into a graph: eagerly it costs the host more than it saves
  // the device (cu/tp_ll.cu).
  MEMRA_CUDA_CHECK(
      env, device, memra_tp_ll_exchange(&job, capturing ? 1 : 0, maxBlocks, s),
      "launchLl(reduce=" + std::to_string(reduce) + ", rows=" + std::to_string(rows) +
          ", rowLen=" + std::to_string(rowLen) + ", sendSrc=" + Hex(sendSrc) +
          ", recvDst=" + Hex(recvDst) + ", rank=" + std::to_string(l.rank) + ", stream=" + Hex(s) +
          ")");
  return env.Undefined();
}

}  // namespace

void RegisterLinkLl(Napi::Env env, Napi::Object exports) {
  exports.Set("llStateBytes", Napi::Function::New(env, LlStateBytes, "llStateBytes"));
  exports.Set("llMaxValues", Napi::Function::New(env, LlMaxValues, "llMaxValues"));
  exports.Set("llDepth", Napi::Function::New(env, LlDepth, "llDepth"));
  exports.Set("llConfigure", Napi::Function::New(env, LlConfigure, "llConfigure"));
  exports.Set("launchLl", Napi::Function::New(env, LaunchLl, "launchLl"));
  exports.Set("llServeStats", Napi::Function::New(env, LlServeStats, "llServeStats"));
}

}  // namespace memra
