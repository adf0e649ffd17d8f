// The two-rank tensor-parallel link kernels of cu/tp_ar.cu (seed 000, the Rust engine's all-reduce
// they come from: docs/architecture.md#terms): push, strided push, fold and the one-shot
// all-reduce, validated and enqueued like the launches in addon/kernels.cpp.
#pragma once

#include <napi.h>

namespace memra {

void RegisterLinkKernels(Napi::Env env, Napi::Object exports);

}  // namespace memra
