// Module init, run once per environment (main thread and each worker thread load their own
// instance: the module is context-aware through NODE_API_MODULE / napi_register_module_v1).
#include <napi.h>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "addon/device.h"
#include "addon/event.h"
#include "addon/graph.h"
#include "addon/host_memory.h"
#include "addon/kernels.h"
#include "addon/link_kernels.h"
#include "addon/link_ll.h"
#include "addon/memory.h"
#include "addon/model_kernels.h"
#include "addon/nccl.h"
#include "addon/parent_graph.h"
#include "addon/stream.h"
#include "addon/thread_affinity.h"
#include "addon/thread_state.h"

#ifndef MEMRA_VERSION
#error "MEMRA_VERSION is defined by CMakeLists.txt from package.json"
#endif

namespace {

// CUDA loads kernels lazily by default, and loading one may wait for every kernel running in the
// context to end. The LL server's grid does not end while joins keep coming, so the first launch
// of a kernel not yet loaded would wait for it forever: the server's first joins stalled that way
// until CUDA_MODULE_LOADING=EAGER (docs/transports.md, "The LL server"). Set before this process's
// first CUDA call, which only this addon makes; a value the user set is kept, and the server
// then refuses to start under lazy loading (addon/ll_server.cpp).
void PreferEagerModuleLoading() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("CUDA_MODULE_LOADING", "EAGER", 0); });
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  PreferEagerModuleLoading();
  memra::ThreadState::Install(env);
  memra::RegisterDevice(env, exports);
  memra::RegisterStream(env, exports);
  memra::RegisterEvent(env, exports);
  memra::RegisterMemory(env, exports);
  memra::RegisterHostMemory(env, exports);
  memra::RegisterKernels(env, exports);
  memra::RegisterLinkKernels(env, exports);
  memra::RegisterLinkLl(env, exports);
  memra::RegisterModelKernels(env, exports);
  memra::RegisterGraph(env, exports);
  memra::RegisterParentGraph(env, exports);
  memra::RegisterThreadAffinity(env, exports);
  memra::RegisterNccl(env, exports);

  // The runtime is linked statically, so the compile-time version is the one running.
  const int rt = CUDART_VERSION;
  const std::string version = std::string("memra-addon ") + MEMRA_VERSION + " cuda " +
                              std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10);
  exports.DefineProperties({
      Napi::PropertyDescriptor::Value("version", Napi::String::New(env, version), napi_enumerable),
      Napi::PropertyDescriptor::Value("cudaRuntimeVersion", Napi::Number::New(env, rt),
                                      napi_enumerable),
  });
  return exports;
}

}  // namespace

NODE_API_MODULE(memra, Init)
