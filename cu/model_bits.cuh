// The bit-exact pieces of the synthetic model: the weight hash, bf16 rounding and widening, and
// fp8 e4m3 encode/decode. The TS oracle (src/decode/weights.ts, src/decode/e4m3.ts) fixes every
// bit of these, so they are written on integer bits and with explicitly rounded f32 operations,
// never left to the compiler's contraction or the hardware converters (whose NaN and saturation
// conventions are not the oracle's). They are __host__ __device__ so a CPU-only build can hold
// them against the oracle without a GPU.
#pragma once

#include <stdint.h>
#include <string.h>

namespace memra_model {

__host__ __device__ __forceinline__ uint32_t F32Bits(float f) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

__host__ __device__ __forceinline__ float F32FromBits(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// One rounding each. On the device the _rn intrinsics are never fused into an FMA, which is the
// point: the oracle rounds the product and then the sum. (A host build must not contract either:
// -ffp-contract=off.)
__host__ __device__ __forceinline__ float MulRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

__host__ __device__ __forceinline__ float AddRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// ---- weights (docs/model.md "Weights") ----

constexpr uint64_t kSeedMul = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kIdMul = 0xD1B54A32D192ED03ull;

// S * kSeedMul + id * kIdMul (mod 2^64): element i of the tensor hashes start + i.
__host__ __device__ __forceinline__ uint64_t HashStart(uint64_t seed, uint64_t id) {
  return seed * kSeedMul + id * kIdMul;
}

// The three splitmix mix steps on z, then z >> 40: the 24-bit u * 2^24.
__host__ __device__ __forceinline__ uint32_t HashU24(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 40);
}

// v = 2u - 1 = (2 * u24 - 2^24) / 2^24: the numerator is an even integer of magnitude <= 2^24,
// so the int -> f32 conversion is exact, and scaling by 2^-24 is exact (no subnormals reach it).
__host__ __device__ __forceinline__ float HashV(uint32_t u24) {
  return static_cast<float>(static_cast<int32_t>(2u * u24) - (1 << 24)) * 0x1p-24f;
}

// bf16 bits of f32 bits `b`, round to nearest, ties to even (weights.ts f32BitsToBf16): adding
// 0x7fff plus the kept lsb carries into bit 16 exactly when the dropped half is past the
// midpoint, or at it with an odd kept part; it never wraps for a non-NaN input. A NaN stays a
// NaN, quieted, instead of rounding into the exponent.
__host__ __device__ __forceinline__ uint16_t Bf16Bits(uint32_t b) {
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x0040u);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

__host__ __device__ __forceinline__ float Bf16ToF32(uint16_t h) {
  return F32FromBits(static_cast<uint32_t>(h) << 16);
}

// kind 0 (matrix): f32(v * scale). kind 1 (gain): f32(1 + f32(0.1f * v)).
__host__ __device__ __forceinline__ uint16_t WeightBf16(uint64_t z, int kind, float scale) {
  const float v = HashV(HashU24(z));
  const float w = kind == 0 ? MulRn(v, scale) : AddRn(1.0f, MulRn(0.1f, v));
  return Bf16Bits(F32Bits(w));
}

// ---- fp8 e4m3 ("FN": no infinities, NaN only at S.1111.111, largest finite 448) ----

constexpr uint8_t kE4m3Nan = 0x7f;
constexpr uint8_t kE4m3MaxCode = 0x7e;  // 448

// Round a value carried as integer part `q` plus the dropped `rem` of `remBits` bits to nearest,
// ties to the even q.
__host__ __device__ __forceinline__ uint32_t RoundHalfEven(uint32_t q, uint32_t rem,
                                                           uint32_t remBits) {
  const uint32_t half = 1u << (remBits - 1);
  return q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
}

// e4m3.ts e4m3Encode, on the f32 bits (exact: no rounding happens before the one the encoder
// performs). NaN of either sign -> 0x7f; |x| >= 448 (inf included) -> +-448; -0 keeps its sign.
__host__ __device__ __forceinline__ uint8_t E4m3Encode(float x) {
  const uint32_t b = F32Bits(x);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return kE4m3Nan;
  const uint8_t s = static_cast<uint8_t>((b >> 24) & 0x80u);
  if (a >= 0x43e00000u) return s | kE4m3MaxCode;  // 448.0f
  if (a < 0x3c800000u) {
    // Below 2^-6 the grid is k * 2^-9, k = 0..8, and the code is k itself (k = 8 is 2^-6, whose
    // code, exponent 1 mantissa 0, is numerically 8). |x| * 2^9 is exact: a power-of-two scale
    // of anything at or above the smallest subnormal, going up.
    const uint32_t m = F32Bits(MulRn(F32FromBits(a), 512.0f));
    // m < 8.0f here; split it into integer and fraction on its own bits.
    if (m < 0x3f800000u) {  // below 1: round 0 or 1 against one half
      const float f = F32FromBits(m);
      return s | static_cast<uint8_t>(f > 0.5f ? 1 : 0);  // exactly 0.5 ties to even 0
    }
    const uint32_t e = (m >> 23) - 127;  // 0..2
    const uint32_t sig = (m & 0x7fffffu) | 0x800000u;
    const uint32_t dropped = 23 - e;
    return s | static_cast<uint8_t>(
                   RoundHalfEven(sig >> dropped, sig & ((1u << dropped) - 1u), dropped));
  }
  // Normal: |x| = 1.f * 2^e, e in [-6, 8]; keep 3 mantissa bits of the 23, nearest even. A
  // mantissa that rounds up to 16/8 moves to the next binade (never past 448: |x| < 448 here).
  int e = static_cast<int>(a >> 23) - 127;
  uint32_t m = RoundHalfEven((a & 0x7fffffu) >> 20 | 8u, a & 0xfffffu, 20);
  if (m == 16u) {
    m = 8u;
    ++e;
  }
  return s | static_cast<uint8_t>(((e + 7) << 3) | static_cast<int>(m - 8u));
}

// e4m3.ts e4m3Decode: exact in f32. 0x7f / 0xff -> NaN, 0x80 -> -0.
__host__ __device__ __forceinline__ float E4m3Decode(uint8_t c) {
  const uint32_t e = (c >> 3) & 0xfu, m = c & 7u;
  uint32_t mag;
  if (e == 15u && m == 7u) {
    mag = 0x7fc00000u;
  } else if (e == 0u) {
    mag = F32Bits(static_cast<float>(m) * 0x1p-9f);
  } else {
    mag = ((e - 7u + 127u) << 23) | (m << 20);
  }
  return F32FromBits(mag | (static_cast<uint32_t>(c & 0x80u) << 24));
}

}  // namespace memra_model
