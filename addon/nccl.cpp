#include "addon/nccl.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>

#include "addon/args.h"
#include "addon/errors.h"
#include "addon/nccl_abi.h"
#include "addon/stream.h"
#include "addon/thread_state.h"

namespace memra {

namespace {

constexpr const char* kLibrary = "libnccl.so.2";

struct NcclApi {
  decltype(&::ncclGetVersion) getVersion;
  decltype(&::ncclGetUniqueId) getUniqueId;
  decltype(&::ncclCommInitRank) commInitRank;
  decltype(&::ncclCommDestroy) commDestroy;
  decltype(&::ncclCommAbort) commAbort;
  decltype(&::ncclGetErrorString) getErrorString;
  decltype(&::ncclAllReduce) allReduce;
  decltype(&::ncclBroadcast) broadcast;
  decltype(&::ncclAllGather) allGather;
  decltype(&::ncclSend) send;
  decltype(&::ncclRecv) recv;
  decltype(&::ncclGroupStart) groupStart;
  decltype(&::ncclGroupEnd) groupEnd;
  int version;
};

// Written once under the once_flag and read-only afterwards; call_once orders every later reader
// after the writer, so no lock is taken on the collective hot path. A failed load is remembered
// too: the library search path cannot change under a running process, so retrying would only
// repeat the same dlerror.
std::once_flag gLoadOnce;
NcclApi gApi{};
bool gLoaded = false;
std::string gLoadError;

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn* out) {
  dlerror();
  void* sym = dlsym(handle, name);
  const char* err = dlerror();
  if (sym == nullptr || err != nullptr) {
    gLoadError = err != nullptr ? err : std::string(name) + " resolved to null";
    return false;
  }
  *out = reinterpret_cast<Fn>(sym);
  return true;
}

void LoadOnce() noexcept {
  try {
    dlerror();
    // RTLD_LOCAL: NCCL's symbols stay out of the global namespace, so another addon or a
    // framework in the same process carrying its own NCCL cannot bind to ours, or ours to theirs.
    void* h = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* err = dlerror();
      gLoadError = err != nullptr ? err : "dlopen returned null";
      return;
    }
    NcclApi api{};
    const bool ok = Resolve(h, "ncclGetVersion", &api.getVersion) &&
                    Resolve(h, "ncclGetUniqueId", &api.getUniqueId) &&
                    Resolve(h, "ncclCommInitRank", &api.commInitRank) &&
                    Resolve(h, "ncclCommDestroy", &api.commDestroy) &&
                    Resolve(h, "ncclCommAbort", &api.commAbort) &&
                    Resolve(h, "ncclGetErrorString", &api.getErrorString) &&
                    Resolve(h, "ncclAllReduce", &api.allReduce) &&
                    Resolve(h, "ncclBroadcast", &api.broadcast) &&
                    Resolve(h, "ncclAllGather", &api.allGather) &&
                    Resolve(h, "ncclSend", &api.send) && Resolve(h, "ncclRecv", &api.recv) &&
                    Resolve(h, "ncclGroupStart", &api.groupStart) &&
                    Resolve(h, "ncclGroupEnd", &api.groupEnd);
    if (!ok) {
      dlclose(h);
      return;
    }
    int version = 0;
    const ncclResult_t r = api.getVersion(&version);
    if (r != ncclSuccess) {
      gLoadError = std::string("ncclGetVersion failed: ") + api.getErrorString(r);
      dlclose(h);
      return;
    }
    api.version = version;
    gApi = api;
    gLoaded = true;
    // Never dlclose'd: communicators of any thread may live until process exit.
  } catch (...) {
    gLoadError = "out of memory while loading";
  }
}

// The loaded API, or throws MEMRA_NCCL_MISSING naming `fn`.
const NcclApi& RequireNccl(Napi::Env env, const char* fn) {
  std::call_once(gLoadOnce, LoadOnce);
  if (!gLoaded) {
    ThrowError(env,
               std::string(fn) + ": " + kLibrary + " could not be loaded (" + gLoadError +
                   "): install NCCL 2.x or choose another transport",
               "MEMRA_NCCL_MISSING");
  }
  return gApi;
}

const char* ResultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclUnknownResult";
  }
}

// Like ThrowCudaError: `<call> on device N: <ncclGetErrorString> (<result name>)`, with `code` =
// the result name and `ncclResult` = its number. `device` < 0 leaves out the device.
[[noreturn]] void ThrowNcclError(Napi::Env env, const NcclApi& api, ncclResult_t r,
                                 const std::string& call, int device) {
  std::string message = call;
  if (device >= 0) message += " on device " + std::to_string(device);
  message += ": ";
  const char* text = api.getErrorString(r);
  message += text != nullptr ? text : "unknown NCCL error";
  message += " (";
  message += ResultName(r);
  message += ")";
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, ResultName(r)));
  error.Set("ncclResult", Napi::Number::New(env, r));
  if (device >= 0) error.Set("device", Napi::Number::New(env, device));
  throw error;
}

// The description is built only on failure, as in MEMRA_CUDA_CHECK.
#define MEMRA_NCCL_CHECK(env, api, device, expr, description)                            \
  do {                                                                                    \
    const ncclResult_t memra_nccl_r_ = (expr);                                            \
    if (memra_nccl_r_ != ncclSuccess) {                                                   \
      ::memra::ThrowNcclError((env), (api), memra_nccl_r_, (description), (device));      \
    }                                                                                     \
  } while (0)

// What a call needs once BeginNcclCall's checks pass: the device for its error messages, and
// the API to call.
struct NcclCall {
  int device;
  const NcclApi& api;
};

// The checks of every call that uses a device, after its argument TypeErrors and in the order
// their errors are reported: no device bound, NCCL missing, a foreign communicator, a foreign
// stream. A null `comm` or `s` means the call takes none (ReadHandle never yields null).
NcclCall BeginNcclCall(Napi::Env env, const ThreadState& ts, const char* fn,
                       ncclComm_t comm = nullptr, cudaStream_t s = nullptr) {
  const int device = ts.RequireBound(env, fn);
  const NcclApi& api = RequireNccl(env, fn);
  if (comm != nullptr) RequireOwned(env, ts.ncclComms, comm, fn, "NCCL communicator");
  if (s != nullptr) RequireOwnedStream(env, ts, s, fn);
  return {device, api};
}

// The argument list ncclAllReduceF32 and ncclAllGatherF32 share, as NCCL's own calls do.
struct BufferPairArgs {
  const void* send;
  void* recv;
  uint64_t count;
  ncclComm_t comm;
  cudaStream_t s;
};

BufferPairArgs ReadBufferPairArgs(const Napi::CallbackInfo& info, const char* fn) {
  BufferPairArgs a;
  a.send = F32(info, 0, fn, "send");
  a.recv = F32(info, 1, fn, "recv");
  a.count = ReadSafeUint(info, 2, fn, "count");
  a.comm = ReadHandle<ncclComm_t>(info, 3, fn, "comm");
  a.s = ReadHandle<cudaStream_t>(info, 4, fn, "stream");
  return a;
}

Napi::Value NcclLoad(const Napi::CallbackInfo& info) {
  const NcclApi& api = RequireNccl(info.Env(), "ncclLoad");
  return Napi::Number::New(info.Env(), api.version);
}

Napi::Value NcclGetUniqueId(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const NcclApi& api = RequireNccl(env, "ncclGetUniqueId");
  // No device: the id is a bootstrap address (host and port) for ncclCommInitRank, made by the
  // thread that hands it to the ranks.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  MEMRA_NCCL_CHECK(env, api, -1, api.getUniqueId(&id), std::string("ncclGetUniqueId()"));
  Napi::Uint8Array out = Napi::Uint8Array::New(env, sizeof id.internal);
  std::memcpy(out.Data(), id.internal, sizeof id.internal);
  return out;
}

Napi::Value NcclCommInitRank(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "ncclCommInitRank";
  const Napi::Value idValue = info[0];
  if (!idValue.IsTypedArray() ||
      idValue.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array ||
      idValue.As<Napi::TypedArray>().ByteLength() != MEMRA_NCCL_UNIQUE_ID_BYTES) {
    ThrowArgError(env, fn, "id", "a Uint8Array of 128 bytes (from ncclGetUniqueId)", idValue);
  }
  const int nranks = static_cast<int>(ReadIntInRange(info, 1, fn, "nranks", 1, 2147483647));
  const int rank = static_cast<int>(ReadIntInRange(info, 2, fn, "rank", 0, nranks - 1));
  ncclUniqueId id;
  std::memcpy(id.internal, idValue.As<Napi::Uint8Array>().Data(), sizeof id.internal);
  const auto [device, api] = BeginNcclCall(env, ts, fn);
  // NCCL takes the device from the calling thread's current device, which bindDevice set.
  // Blocks until every rank has joined: each rank's thread must be in this call at once.
  ncclComm_t comm = nullptr;
  MEMRA_NCCL_CHECK(env, api, device, api.commInitRank(&comm, nranks, id, rank),
                   "ncclCommInitRank(nranks=" + std::to_string(nranks) +
                       ", rank=" + std::to_string(rank) + ")");
  return AdoptHandle(env, ts.ncclComms, comm, api.commAbort);
}

Napi::Value NcclCommDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const auto comm = ReadHandle<ncclComm_t>(info, 0, "ncclCommDestroy", "comm");
  const auto [device, api] = BeginNcclCall(env, ts, "ncclCommDestroy", comm);
  // Forget it whatever the outcome: a failed destroy leaves nothing usable behind.
  ts.ncclComms.erase(comm);
  // Waits for this rank's queued operations on the communicator; does not wait for other ranks.
  MEMRA_NCCL_CHECK(env, api, device, api.commDestroy(comm),
                   "ncclCommDestroy(comm=" + Hex(comm) + ")");
  return env.Undefined();
}

Napi::Value NcclAllReduceF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "ncclAllReduceF32";
  const BufferPairArgs a = ReadBufferPairArgs(info, fn);
  const auto [device, api] = BeginNcclCall(env, ts, fn, a.comm, a.s);
  if (a.count == 0) return env.Undefined();
  MEMRA_NCCL_CHECK(env, api, device,
                   api.allReduce(a.send, a.recv, a.count, ncclFloat32, ncclSum, a.comm, a.s),
                   "ncclAllReduce(send=" + Hex(a.send) + ", recv=" + Hex(a.recv) +
                       ", count=" + std::to_string(a.count) + ", ncclFloat32, ncclSum, comm=" +
                       Hex(a.comm) + ", stream=" + Hex(a.s) + ")");
  return env.Undefined();
}

Napi::Value NcclBroadcastF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "ncclBroadcastF32";
  const void* send = F32(info, 0, fn, "send");
  void* recv = F32(info, 1, fn, "recv");
  const uint64_t count = ReadSafeUint(info, 2, fn, "count");
  // NCCL checks root < nranks itself and reports it as ncclInvalidArgument.
  const int root = static_cast<int>(ReadIntInRange(info, 3, fn, "root", 0, 2147483647));
  const auto comm = ReadHandle<ncclComm_t>(info, 4, fn, "comm");
  const auto s = ReadHandle<cudaStream_t>(info, 5, fn, "stream");
  const auto [device, api] = BeginNcclCall(env, ts, fn, comm, s);
  if (count == 0) return env.Undefined();
  MEMRA_NCCL_CHECK(env, api, device, api.broadcast(send, recv, count, ncclFloat32, root, comm, s),
                   "ncclBroadcast(send=" + Hex(send) + ", recv=" + Hex(recv) +
                       ", count=" + std::to_string(count) + ", ncclFloat32, root=" +
                       std::to_string(root) + ", comm=" + Hex(comm) + ", stream=" + Hex(s) + ")");
  return env.Undefined();
}

Napi::Value NcclAllGatherF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "ncclAllGatherF32";
  const BufferPairArgs a = ReadBufferPairArgs(info, fn);
  const auto [device, api] = BeginNcclCall(env, ts, fn, a.comm, a.s);
  if (a.count == 0) return env.Undefined();
  MEMRA_NCCL_CHECK(env, api, device,
                   api.allGather(a.send, a.recv, a.count, ncclFloat32, a.comm, a.s),
                   "ncclAllGather(send=" + Hex(a.send) + ", recv=" + Hex(a.recv) +
                       ", sendcount=" + std::to_string(a.count) + ", ncclFloat32, comm=" +
                       Hex(a.comm) + ", stream=" + Hex(a.s) + ")");
  return env.Undefined();
}

Napi::Value NcclSendRecvF32(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ThreadState& ts = ThreadState::Of(env);
  const char* fn = "ncclSendRecvF32";
  const void* send = F32(info, 0, fn, "send");
  const uint64_t sendCount = ReadSafeUint(info, 1, fn, "sendCount");
  void* recv = F32(info, 2, fn, "recv");
  const uint64_t recvCount = ReadSafeUint(info, 3, fn, "recvCount");
  const int peer = static_cast<int>(ReadIntInRange(info, 4, fn, "peer", 0, 2147483647));
  const auto comm = ReadHandle<ncclComm_t>(info, 5, fn, "comm");
  const auto s = ReadHandle<cudaStream_t>(info, 6, fn, "stream");
  const auto [device, api] = BeginNcclCall(env, ts, fn, comm, s);
  if (sendCount == 0 && recvCount == 0) return env.Undefined();
  const std::string args = "(peer=" + std::to_string(peer) + ", comm=" + Hex(comm) +
                           ", stream=" + Hex(s) + ")";
  // One group, so the send and the receive progress together: issued one after the other, both
  // ranks' sends could each wait for a receive the other has not posted yet.
  MEMRA_NCCL_CHECK(env, api, device, api.groupStart(),
                   "ncclGroupStart() in ncclSendRecvF32" + args);
  ncclResult_t r = ncclSuccess;
  std::string failed;
  if (sendCount > 0) {
    r = api.send(send, sendCount, ncclFloat32, peer, comm, s);
    if (r != ncclSuccess) {
      failed = "ncclSend(send=" + Hex(send) + ", count=" + std::to_string(sendCount) + ")";
    }
  }
  if (r == ncclSuccess && recvCount > 0) {
    r = api.recv(recv, recvCount, ncclFloat32, peer, comm, s);
    if (r != ncclSuccess) {
      failed = "ncclRecv(recv=" + Hex(recv) + ", count=" + std::to_string(recvCount) + ")";
    }
  }
  // Always closed, even after a failure: the group depth is per thread, and one left open would
  // swallow every later NCCL call of this thread into a group that never ends.
  const ncclResult_t endR = api.groupEnd();
  if (r != ncclSuccess) ThrowNcclError(env, api, r, failed + " in ncclSendRecvF32" + args, device);
  MEMRA_NCCL_CHECK(env, api, device, endR, "ncclGroupEnd() in ncclSendRecvF32" + args);
  return env.Undefined();
}

}  // namespace

void ReleaseNcclCommAtTeardown(void* comm, bool abort) noexcept {
  // A communicator exists only if a load succeeded, so this finds the API loaded; call_once
  // still orders this read after the load for a thread that never called RequireNccl itself.
  try {
    std::call_once(gLoadOnce, LoadOnce);
  } catch (...) {
    return;  // std::system_error from the once machinery; never seen, but this must not throw
  }
  if (!gLoaded || comm == nullptr) return;
  auto* c = static_cast<ncclComm_t>(comm);
  (void)(abort ? gApi.commAbort(c) : gApi.commDestroy(c));
}

void RegisterNccl(Napi::Env env, Napi::Object exports) {
  exports.Set("ncclLoad", Napi::Function::New(env, NcclLoad, "ncclLoad"));
  exports.Set("ncclGetUniqueId", Napi::Function::New(env, NcclGetUniqueId, "ncclGetUniqueId"));
  exports.Set("ncclCommInitRank", Napi::Function::New(env, NcclCommInitRank, "ncclCommInitRank"));
  exports.Set("ncclCommDestroy", Napi::Function::New(env, NcclCommDestroy, "ncclCommDestroy"));
  exports.Set("ncclAllReduceF32", Napi::Function::New(env, NcclAllReduceF32, "ncclAllReduceF32"));
  exports.Set("ncclBroadcastF32", Napi::Function::New(env, NcclBroadcastF32, "ncclBroadcastF32"));
  exports.Set("ncclAllGatherF32", Napi::Function::New(env, NcclAllGatherF32, "ncclAllGatherF32"));
  exports.Set("ncclSendRecvF32", Napi::Function::New(env, NcclSendRecvF32, "ncclSendRecvF32"));
}

}  // namespace memra
