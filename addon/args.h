// Argument readers. Each validates one positional argument and throws a TypeError naming the
// function and the argument; a missing argument reads as undefined. Handles and pointers travel
// as doubles, so every integer crossing the boundary must be a safe integer (below 2^53).
#pragma once

#include <napi.h>

#include <cstddef>
#include <cstdint>

namespace memra {

constexpr double kTwoPow53 = 9007199254740992.0;
constexpr int64_t kMaxSafeInt = (int64_t{1} << 53) - 1;

// [0, 2^53).
uint64_t ReadSafeUint(const Napi::CallbackInfo& info, size_t index, const char* fn,
                      const char* name);
// [1, 2^53): sizes where zero would make CUDA hand back a null pointer.
uint64_t ReadPositiveSafeUint(const Napi::CallbackInfo& info, size_t index, const char* fn,
                              const char* name);
// [0, 2^31).
int ReadOrdinal(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name);
// [0, 2^32).
uint32_t ReadU32(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name);
// Integer in [lo, hi].
int64_t ReadIntInRange(const Napi::CallbackInfo& info, size_t index, const char* fn,
                       const char* name, int64_t lo, int64_t hi);
// The same check on a value that is not itself an argument (an array element, an object's
// field), `name` spelling out where it sits ("copies[2].dst"). `what` describes the range in the
// message; null gives "an integer in [lo, hi]".
int64_t ReadIntValue(Napi::Env env, const Napi::Value& value, const char* fn, const char* name,
                     int64_t lo, int64_t hi, const char* what = nullptr);
// Any number, NaN and infinities included (a fill value may poison on purpose).
double ReadNumber(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name);
bool ReadBool(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name);

// A handle or address: an integer in [1, 2^53). Zero is refused: a null stream would mean the
// legacy stream, and a kernel storing through a null pointer poisons the whole context.
uintptr_t ReadAddress(const Napi::CallbackInfo& info, size_t index, const char* fn,
                      const char* name);
template <typename T>
T ReadHandle(const Napi::CallbackInfo& info, size_t index, const char* fn, const char* name) {
  return reinterpret_cast<T>(ReadAddress(info, index, fn, name));
}
// ReadAddress plus an alignment check: a misaligned vector access is a sticky context error.
uintptr_t ReadAlignedAddress(const Napi::CallbackInfo& info, size_t index, const char* fn,
                             const char* name, uintptr_t alignment, const char* forWhat);

// Device pointers by element type, aligned for it: the kernels' operands.
inline float* F32(const Napi::CallbackInfo& info, size_t i, const char* fn, const char* name) {
  return reinterpret_cast<float*>(ReadAlignedAddress(info, i, fn, name, 4, "f32"));
}
inline uint16_t* Bf16(const Napi::CallbackInfo& info, size_t i, const char* fn, const char* name) {
  return reinterpret_cast<uint16_t*>(ReadAlignedAddress(info, i, fn, name, 2, "bf16"));
}
inline int32_t* I32(const Napi::CallbackInfo& info, size_t i, const char* fn, const char* name) {
  return reinterpret_cast<int32_t*>(ReadAlignedAddress(info, i, fn, name, 4, "i32"));
}
inline uint8_t* U8(const Napi::CallbackInfo& info, size_t i, const char* fn, const char* name) {
  return reinterpret_cast<uint8_t*>(ReadAddress(info, i, fn, name));
}

// The bytes of a typed array or DataView, whether its buffer is an ArrayBuffer or a
// SharedArrayBuffer (napi_get_arraybuffer_info refuses the latter; the view APIs do not).
struct ViewBytes {
  uint8_t* data;      // first byte of the view (already offset), null when detached
  size_t byteLength;  // bytes in the view
  size_t byteOffset;  // the view's offset inside its buffer
  napi_value buffer;  // the ArrayBuffer or SharedArrayBuffer behind the view
};
ViewBytes ReadView(const Napi::CallbackInfo& info, size_t index, const char* fn,
                   const char* name);

// Address to number; throws if it does not fit a double exactly (it always does on x86-64).
Napi::Value AddressToValue(Napi::Env env, const void* p);

}  // namespace memra
