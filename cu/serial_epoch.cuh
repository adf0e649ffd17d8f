// Epochs and sequence numbers compared as serial numbers, shared by every device-side wait on
// one (the one-shot's barrier, cu/tp_ar.cu; the LL joins and their server, cu/tp_ll_chunks.cuh,
// cu/tp_ll_server.cu).
#pragma once

// "flag has reached e" in serial-number arithmetic: a u32 epoch wraps after 2^32 launches (days
// at decode rates), and a plain >= would then wait on a flag that already passed. The flags
// compared are never more than a few epochs apart, so half the range is plenty of margin.
__device__ __forceinline__ bool Reached(unsigned flag, unsigned e) {
  return static_cast<int>(flag - e) >= 0;
}
