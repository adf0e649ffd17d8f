// The device's nanosecond clock, for every kernel that times or bounds itself by wall time.
// %globaltimer counts nanoseconds independent of SM clock changes; on H200 it steps by 32 ns
// (scripts/probes/timing-probe.cu).
#pragma once

#include <stdint.h>

__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
