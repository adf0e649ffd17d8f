// Seed 003's EP step (the Rust engine's multi-device graph of one expert-parallel step that this
// design comes from; docs/architecture.md#terms) as one multi-device CUDA graph: child graphs
// captured per device (never instantiated on their own) and a parent, built here on the owner's
// thread, that joins them with explicit peer copy nodes. Copy nodes, not captured peer copies: stream capture refuses
// cudaMemcpyPeerAsync, and the seed built its copies as nodes for that reason.
#pragma once

#include <napi.h>

namespace memra {

void RegisterParentGraph(Napi::Env env, Napi::Object exports);

}  // namespace memra
