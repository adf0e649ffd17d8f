// The calling thread's CPU affinity (Linux). A pinned device worker runs its ring loop on one core
// near its GPU: a worker the scheduler moves between cores, or onto the other socket, pays a cold
// cache and a remote memory hop on every ring record it reads and every launch it makes.
#pragma once

#include <napi.h>

namespace memra {

void RegisterThreadAffinity(Napi::Env env, Napi::Object exports);

}  // namespace memra
