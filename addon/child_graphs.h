// Process-wide: the child graphs (captured, never instantiated) that one worker's thread made and
// another worker's parent graph may reference. Seed 003 builds the EP step's parent graph on the
// owner's thread from the owner's children AND the peer's child, captured on the peer's thread;
// a thread's own tables (ThreadState) cannot vouch for a handle another thread made, so this table
// does: which device a child was captured on, which thread owns it, and how many parent graphs
// hold it. A held child is not destroyed: children outlive every parent that holds them (the seed
// keeps them alive "to preserve the allocation and module lifetime contract").
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace memra::child_graphs {

// Registers a child just captured on `device` by the thread whose state is `owner`.
// May throw std::bad_alloc / std::system_error.
void Add(cudaGraph_t g, int device, const void* owner);

// The device `g` was captured on, or -1 when no live child is registered under `g`.
int DeviceOf(cudaGraph_t g);

// One more parent holds `g` (false when `g` is not registered: it was destroyed meanwhile).
bool Hold(cudaGraph_t g);
// A parent that held `g` is gone. Never throws.
void Drop(cudaGraph_t g) noexcept;

// Unregisters `g` if `owner` owns it and no parent holds it; otherwise false, with the reason
// in *why. `force` (thread teardown) unregisters even a held child: CUDA cloned it into each
// parent at cudaGraphAddChildGraphNode, so the parent stays valid; only orderly paths need the
// contract. Never throws when force is set.
bool Remove(cudaGraph_t g, const void* owner, bool force, std::string* why);

}  // namespace memra::child_graphs
