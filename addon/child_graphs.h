// Process-wide: the child graphs (captured, never instantiated) that one worker's thread made and
// another worker's parent graph may reference. Seed 003 builds the EP step's parent graph on the
// owner's thread from the owner's children AND the peer's child, captured on the peer's thread;
// a thread's own tables (ThreadState) cannot vouch for a handle another thread made, so this table
// does: which device a child was captured on and how many parent graphs hold it. Which thread
// owns a child is recorded once, in that thread's ThreadState::childGraphs, which every orderly
// caller checks before it gets here. A held child is not destroyed: children outlive every parent
// that holds them (the seed keeps them alive "to preserve the allocation and module lifetime
// contract").
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace memra::child_graphs {

// Registers a child just captured on `device`. May throw std::bad_alloc / std::system_error.
void Add(cudaGraph_t g, int device);

// The device `g` was captured on, or -1 when no live child is registered under `g`.
int DeviceOf(cudaGraph_t g);

// One more parent holds `g` (false when `g` is not registered: it was destroyed meanwhile).
bool Hold(cudaGraph_t g);
// A parent that held `g` is gone. Never throws.
void Drop(cudaGraph_t g) noexcept;

// Unregisters `g` unless a parent holds it, then false with the reason in *why; true when `g`
// is not registered (no parent can hold it). The caller has checked that its thread owns `g`.
// `force` (thread teardown) unregisters even a held child: CUDA cloned it into each parent at
// cudaGraphAddChildGraphNode, so the parent stays valid; only orderly paths need the contract.
// Never throws when force is set.
bool Remove(cudaGraph_t g, bool force, std::string* why);

}  // namespace memra::child_graphs
