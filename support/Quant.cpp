// Quant.cpp - GGUF block formats: half/bfloat16 conversion, dequantization, quantization.
//
// The dequantizers reproduce ggml's dequantize_row_* bit for bit: same block layouts and the same
// float operations in the same order (scale products first, then one multiply and one add per
// weight). The quantizers follow the structure of ggml's quantize_row_*_ref reference quantizers
// (round-to-nearest, same choice of scales and mins), so a round trip loses what ggml's loses.
#include "support/Quant.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"

// ggml's C sources are compiled without floating-point contraction; a fused multiply-add in
// `d1 * q - m1` would change the last bit of a dequantized weight, so forbid it here.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace sinter {

//===----------------------------------------------------------------------===//
// Half and bfloat16
//===----------------------------------------------------------------------===//

namespace {

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Shifts `m` right by `shift` (1..31), rounding to nearest, ties to even.
uint32_t shiftRightRne(uint32_t m, int shift) {
  uint32_t kept = m >> shift;
  uint32_t rest = m & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1)))
    ++kept;
  return kept;
}

} // namespace

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) // infinity, or NaN made quiet (as F16C and ggml's scalar path do)
    return bitsFloat(sign | 0x7f800000 | (mant ? 0x400000 : 0) | (mant << 13));
  if (exp != 0)
    return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24 is exact in float.
  float mag = std::ldexp(static_cast<float>(mant), -24);
  return sign ? -mag : mag;
}

uint16_t floatToHalf(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t mag = u & 0x7fffffff;
  if (mag > 0x7f800000) // NaN: quiet, keep the top of the payload (as F16C does)
    return sign | 0x7e00 | static_cast<uint16_t>((mag >> 13) & 0x3ff);
  // 65520 (0x477ff000) is halfway between 65504 and 2^16; the tie goes to the even 2^16 = inf.
  if (mag >= 0x477ff000)
    return sign | 0x7c00;
  uint32_t exp = mag >> 23;
  uint32_t mant = mag & 0x7fffff;
  if (exp >= 113) // normal half: rebias, then round the 13 dropped bits (a carry may bump exp)
    return sign | static_cast<uint16_t>(shiftRightRne((exp - 112) << 23 | mant, 13));
  // Subnormal half (or zero): units of 2^-24. The float is (2^23 + mant) * 2^(exp-150).
  if (exp < 102) // below 2^-25: rounds to zero
    return sign;
  uint32_t full = mant | 0x800000;
  return sign | static_cast<uint16_t>(shiftRightRne(full, 126 - static_cast<int>(exp)));
}

float bf16ToFloat(uint16_t b) { return bitsFloat(uint32_t(b) << 16); }

uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffff) > 0x7f800000) // NaN: force the quiet bit so truncation cannot make inf
    return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

//===----------------------------------------------------------------------===//
// Dequantization, one block at a time
//===----------------------------------------------------------------------===//

namespace {

constexpr int kQK = 32;   // weights per legacy block
constexpr int kQKK = 256; // weights per K-quant super-block

float loadHalf(const uint8_t *p) { return halfToFloat(uint16_t(p[0] | (p[1] << 8))); }

void storeHalf(uint8_t *p, float f) {
  uint16_t h = floatToHalf(f);
  p[0] = uint8_t(h & 0xff);
  p[1] = uint8_t(h >> 8);
}

uint32_t loadU32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// The 4-bit quant of weight j (0..31) of a legacy block: byte j%16, low nibble for j < 16.
int nibble(const uint8_t *qs, int j) { return j < 16 ? (qs[j] & 0xf) : (qs[j - 16] >> 4); }

// Q4_0: {d, qs[16]}; y = (q - 8) * d.
void dequantQ4_0(const uint8_t *b, float *y) {
  float d = loadHalf(b);
  for (int j = 0; j < kQK; ++j)
    y[j] = static_cast<float>(nibble(b + 2, j) - 8) * d;
}

// Q4_1: {d, m, qs[16]}; y = q * d + m.
void dequantQ4_1(const uint8_t *b, float *y) {
  float d = loadHalf(b), m = loadHalf(b + 2);
  for (int j = 0; j < kQK; ++j)
    y[j] = static_cast<float>(nibble(b + 4, j)) * d + m;
}

// Q5_0: {d, qh[4], qs[16]}; bit j of the little-endian qh is the 5th bit of weight j.
void dequantQ5_0(const uint8_t *b, float *y) {
  float d = loadHalf(b);
  uint32_t qh = loadU32(b + 2);
  for (int j = 0; j < kQK; ++j) {
    int q = nibble(b + 6, j) | int((qh >> j) & 1) << 4;
    y[j] = static_cast<float>(q - 16) * d;
  }
}

// Q5_1: {d, m, qh[4], qs[16]}; y = q * d + m.
void dequantQ5_1(const uint8_t *b, float *y) {
  float d = loadHalf(b), m = loadHalf(b + 2);
  uint32_t qh = loadU32(b + 4);
  for (int j = 0; j < kQK; ++j) {
    int q = nibble(b + 8, j) | int((qh >> j) & 1) << 4;
    y[j] = static_cast<float>(q) * d + m;
  }
}

// Q8_0: {d, qs[32] int8}.
void dequantQ8_0(const uint8_t *b, float *y) {
  float d = loadHalf(b);
  for (int j = 0; j < kQK; ++j)
    y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// The 2-bit field of weight w (0..255) in the qs[64] of Q2_K and Q3_K: each 128-weight half
// uses 32 bytes; weight 32*s + l of a half sits in bits 2s..2s+1 of byte l.
int crumb(const uint8_t *qs, int w) {
  return (qs[32 * (w / 128) + w % 32] >> (2 * (w % 128 / 32))) & 3;
}

// Q2_K: {scales[16], qs[64], d, dmin}; scale byte w/16 holds the scale (low) and min (high).
void dequantQ2_K(const uint8_t *b, float *y) {
  const uint8_t *scales = b, *qs = b + 16;
  float d = loadHalf(b + 80), dmin = loadHalf(b + 82);
  for (int sub = 0; sub < 16; ++sub) {
    float dl = d * static_cast<float>(scales[sub] & 0xf);
    float ml = dmin * static_cast<float>(scales[sub] >> 4);
    for (int w = 16 * sub; w < 16 * sub + 16; ++w)
      y[w] = dl * static_cast<float>(crumb(qs, w)) - ml;
  }
}

// The 6-bit scale j (0..15) of Q3_K: low 4 bits from byte j%8 (low nibble for j < 8), high 2 bits
// from byte 8 + j%4 at bit 2*(j/4). The same values ggml's kmask1/kmask2 word shuffle produces.
int q3kScale(const uint8_t *s, int j) {
  int low = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
  int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | high << 4;
}

// Q3_K: {hmask[32], qs[64], scales[12], d}; q = crumb - 4 unless bit w/32 of hmask[w%32] is set.
void dequantQ3_K(const uint8_t *b, float *y) {
  const uint8_t *hmask = b, *qs = b + 32, *scales = b + 96;
  float d = loadHalf(b + 108);
  for (int sub = 0; sub < 16; ++sub) {
    float dl = d * static_cast<float>(q3kScale(scales, sub) - 32);
    for (int w = 16 * sub; w < 16 * sub + 16; ++w) {
      int high = (hmask[w % 32] >> (w / 32)) & 1;
      y[w] = dl * static_cast<float>(crumb(qs, w) - (high ? 0 : 4));
    }
  }
}

// The 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K (ggml's get_scale_min_k4): bytes
// 0..3 hold scales 0..3, bytes 4..7 mins 0..3, in their low 6 bits; the upper 2 bits of those
// bytes and the nibbles of bytes 8..11 hold scales and mins 4..7.
void scaleMinK4(const uint8_t *s, int j, int *scale, int *min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
    return;
  }
  *scale = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
  *min = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
}

// The 4-bit quant of weight w in the qs[128] of Q4_K/Q5_K: 64-weight chunks of 32 bytes, low
// nibbles first.
int kNibble(const uint8_t *qs, int w) {
  uint8_t byte = qs[32 * (w / 64) + w % 32];
  return w % 64 < 32 ? (byte & 0xf) : (byte >> 4);
}

// Q4_K and Q5_K: {d, dmin, scales[12], (qh[32],) qs[128]}; y = (d*sc) * q - (dmin*m) per
// 32-weight sub-block. Q5_K's fifth bit of weight w is bit w/32 of qh[w%32].
void dequantQ45K(const uint8_t *b, float *y, bool fiveBit) {
  const uint8_t *scales = b + 4, *qh = b + 16, *qs = fiveBit ? b + 48 : b + 16;
  float d = loadHalf(b), dmin = loadHalf(b + 2);
  for (int sub = 0; sub < 8; ++sub) {
    int sc, m;
    scaleMinK4(scales, sub, &sc, &m);
    float d1 = d * static_cast<float>(sc);
    float m1 = dmin * static_cast<float>(m);
    for (int w = 32 * sub; w < 32 * sub + 32; ++w) {
      int q = kNibble(qs, w);
      if (fiveBit)
        q += ((qh[w % 32] >> sub) & 1) << 4;
      y[w] = d1 * static_cast<float>(q) - m1;
    }
  }
}

// Q6_K: {ql[128], qh[64], scales[16] int8, d}. Weight w = 128h + 32k + l: low 4 bits from
// ql[64h + 32*(k%2) + l] (low nibble for k < 2), high 2 bits from qh[32h + l] at bit 2k.
void dequantQ6_K(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *scales = reinterpret_cast<const int8_t *>(b + 192);
  float d = loadHalf(b + 208);
  for (int w = 0; w < kQKK; ++w) {
    int h = w / 128, k = w % 128 / 32, l = w % 32;
    uint8_t lowByte = ql[64 * h + 32 * (k % 2) + l];
    int low = k < 2 ? (lowByte & 0xf) : (lowByte >> 4);
    int high = (qh[32 * h + l] >> (2 * k)) & 3;
    int q = (low | high << 4) - 32;
    y[w] = d * static_cast<float>(scales[w / 16]) * static_cast<float>(q);
  }
}

//===----------------------------------------------------------------------===//
// Quantization, one block at a time
//===----------------------------------------------------------------------===//

// Round to nearest, ties to even (ggml's nearest_int under the default rounding mode).
int nearestInt(float v) { return static_cast<int>(std::nearbyint(v)); }

// The value of largest magnitude (sign kept); 0 for an all-zero block.
float signedAbsMax(const float *x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// Writes 32 legacy quants of `bits` (4 or 5) bits: nibbles to qs[16] (weights 0..15 low, 16..31
// high), fifth bits to the little-endian qh word (bit j for weight j).
void packLegacy(const int *q, uint8_t *qs, uint8_t *qh, int bits) {
  std::memset(qs, 0, 16);
  uint32_t high = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j % 16] |= uint8_t((q[j] & 0xf) << (j < 16 ? 0 : 4));
    high |= uint32_t((q[j] >> 4) & 1) << j;
  }
  for (int i = 0; bits == 5 && i < 4; ++i)
    qh[i] = uint8_t(high >> (8 * i));
}

// Symmetric 4/5-bit blocks (Q4_0, Q5_0): d = max / -2^(bits-1), so the largest-magnitude weight
// maps to the end of the range; q = trunc(x/d + 2^(bits-1) + 0.5) clamped to the top code.
void quantSymmetric(const float *x, uint8_t *b, int bits) {
  int offset = 1 << (bits - 1), top = (1 << bits) - 1, q[kQK];
  float d = signedAbsMax(x, kQK) / static_cast<float>(-offset);
  float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j)
    q[j] = std::min(top, static_cast<int>(x[j] * id + (static_cast<float>(offset) + 0.5f)));
  storeHalf(b, d);
  packLegacy(q, b + (bits == 4 ? 2 : 6), b + 2, bits);
}

// Affine 4/5-bit blocks (Q4_1, Q5_1): d = (max - min) / top, m = min, q = round((x - min) / d).
void quantAffine(const float *x, uint8_t *b, int bits) {
  int top = (1 << bits) - 1, q[kQK];
  float min = *std::min_element(x, x + kQK), max = *std::max_element(x, x + kQK);
  float d = (max - min) / static_cast<float>(top);
  float id = d != 0 ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j)
    q[j] = std::min(top, static_cast<int>((x[j] - min) * id + 0.5f));
  storeHalf(b, d);
  storeHalf(b + 2, min);
  packLegacy(q, b + (bits == 4 ? 4 : 8), b + 4, bits);
}

// Q8_0: d = amax / 127, q = round-half-away(x / d).
void quantQ8_0(const float *x, uint8_t *b) {
  float amax = 0;
  for (int j = 0; j < kQK; ++j)
    amax = std::max(amax, std::fabs(x[j]));
  float d = amax / 127.0f;
  float id = d != 0 ? 1.0f / d : 0.0f;
  storeHalf(b, d);
  for (int j = 0; j < kQK; ++j)
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

// Scale and min for n weights on levels 0..nmax (ggml's make_qkx2_quants): start from the
// min/max fit, then try nstep+1 stretched grids, refitting scale and min by weighted least
// squares and keeping the lowest weighted squared error. Returns the scale; *negMin = -min >= 0.
float fitScaleMin(int n, int nmax, const float *x, const float *weights, uint8_t *levels,
                  float *negMin, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0], sumW = weights[0], sumX = weights[0] * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sumW += weights[i];
    sumX += weights[i] * x[i];
  }
  min = std::min(min, 0.0f); // the min is subtracted, so it is never positive
  if (max == min) {
    std::fill(levels, levels + n, uint8_t(0));
    *negMin = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float bestError = 0;
  for (int i = 0; i < n; ++i) {
    levels[i] = uint8_t(std::clamp(nearestInt(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * levels[i] + min - x[i];
    bestError += weights[i] * diff * diff;
  }
  uint8_t trial[kQK];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sumL = 0, sumL2 = 0, sumXL = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::clamp(nearestInt(iscale * (x[i] - min)), 0, nmax);
      trial[i] = uint8_t(l);
      sumL += weights[i] * l;
      sumL2 += weights[i] * l * l;
      sumXL += weights[i] * l * x[i];
    }
    float det = sumW * sumL2 - sumL * sumL;
    if (det <= 0)
      continue;
    float thisScale = (sumW * sumXL - sumX * sumL) / det;
    float thisMin = (sumL2 * sumX - sumL * sumXL) / det;
    if (thisMin > 0) { // a positive min would add; refit the scale alone with min 0
      thisMin = 0;
      thisScale = sumXL / sumL2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      float diff = thisScale * trial[i] + thisMin - x[i];
      error += weights[i] * diff * diff;
    }
    if (error < bestError) {
      std::copy(trial, trial + n, levels);
      bestError = error;
      scale = thisScale;
      min = thisMin;
    }
  }
  *negMin = -min;
  return scale;
}

// Q4_K and Q5_K: eight 32-weight sub-blocks, each fitted with a scale and a min (weights
// av|x| + |x|), both then quantized to 6 bits against the block's largest scale and min, then the
// 4- or 5-bit levels recomputed from the stored (rounded) scales. Q5_K keeps the fifth bit of
// weight w in bit w/32 of qh[w%32].
void quantQ45K(const float *x, uint8_t *b, bool fiveBit) {
  const int nmax = fiveBit ? 31 : 15;
  uint8_t levels[kQKK];
  float scales[8], mins[8], weights[kQK];
  float maxScale = 0, maxMin = 0;
  for (int j = 0; j < 8; ++j) {
    const float *xs = x + 32 * j;
    float sumX2 = 0;
    for (int l = 0; l < 32; ++l)
      sumX2 += xs[l] * xs[l];
    float avX = std::sqrt(sumX2 / 32);
    for (int l = 0; l < 32; ++l)
      weights[l] = avX + std::fabs(xs[l]);
    scales[j] =
        fiveBit ? fitScaleMin(32, nmax, xs, weights, levels + 32 * j, &mins[j], -0.5f, 0.1f, 15)
                : fitScaleMin(32, nmax, xs, weights, levels + 32 * j, &mins[j], -1.0f, 0.1f, 20);
    maxScale = std::max(maxScale, scales[j]);
    maxMin = std::max(maxMin, mins[j]);
  }
  std::memset(b, 0, fiveBit ? 176 : 144);
  float invScale = maxScale > 0 ? 63.0f / maxScale : 0.0f;
  float invMin = maxMin > 0 ? 63.0f / maxMin : 0.0f;
  uint8_t *s = b + 4;
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = uint8_t(std::clamp(nearestInt(invScale * scales[j]), 0, 63));
    uint8_t lm = uint8_t(std::clamp(nearestInt(invMin * mins[j]), 0, 63));
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
      continue;
    }
    s[j + 4] = uint8_t((ls & 0xf) | (lm & 0xf) << 4);
    s[j - 4] |= uint8_t((ls >> 4) << 6);
    s[j] |= uint8_t((lm >> 4) << 6);
  }
  storeHalf(b, maxScale / 63.0f);
  storeHalf(b + 2, maxMin / 63.0f);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scaleMinK4(s, j, &sc, &m);
    float d = loadHalf(b) * static_cast<float>(sc);
    if (d == 0)
      continue;
    float dm = loadHalf(b + 2) * static_cast<float>(m);
    for (int l = 32 * j; l < 32 * j + 32; ++l)
      levels[l] = uint8_t(std::clamp(nearestInt((x[l] + dm) / d), 0, nmax));
  }
  uint8_t *qh = b + 16, *qs = fiveBit ? b + 48 : b + 16;
  for (int w = 0; w < kQKK; w += 64)
    for (int l = 0; l < 32; ++l)
      qs[w / 2 + l] = uint8_t((levels[w + l] & 0xf) | (levels[w + l + 32] & 0xf) << 4);
  for (int w = 0; fiveBit && w < kQKK; ++w)
    qh[w % 32] |= uint8_t(((levels[w] >> 4) & 1) << (w / 32));
}

// Q2_K: sixteen 16-weight sub-blocks fitted with a scale and a min on levels 0..3 (weights |x|),
// both quantized to 4 bits against the block's largest (d = max/15, dmin = maxMin/15), then the
// levels recomputed from the stored scales.
void quantQ2_K(const float *x, uint8_t *b) {
  uint8_t levels[kQKK];
  float scales[16], mins[16], weights[16];
  float maxScale = 0, maxMin = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l)
      weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = fitScaleMin(16, 3, x + 16 * j, weights, levels + 16 * j, &mins[j], -0.5f, 0.1f, 15);
    maxScale = std::max(maxScale, scales[j]);
    maxMin = std::max(maxMin, mins[j]);
  }
  std::memset(b, 0, 84);
  float invScale = maxScale > 0 ? 15.0f / maxScale : 0.0f;
  float invMin = maxMin > 0 ? 15.0f / maxMin : 0.0f;
  for (int j = 0; j < 16; ++j) {
    int ls = std::clamp(nearestInt(invScale * scales[j]), 0, 15);
    int lm = std::clamp(nearestInt(invMin * mins[j]), 0, 15);
    b[j] = uint8_t(ls | lm << 4);
  }
  storeHalf(b + 80, maxScale / 15.0f);
  storeHalf(b + 82, maxMin / 15.0f);
  for (int j = 0; j < 16; ++j) {
    float d = loadHalf(b + 80) * static_cast<float>(b[j] & 0xf);
    if (d == 0)
      continue;
    float dm = loadHalf(b + 82) * static_cast<float>(b[j] >> 4);
    for (int l = 16 * j; l < 16 * j + 16; ++l)
      levels[l] = uint8_t(std::clamp(nearestInt((x[l] + dm) / d), 0, 3));
  }
  uint8_t *qs = b + 16;
  for (int w = 0; w < kQKK; ++w)
    qs[32 * (w / 128) + w % 32] |= uint8_t(levels[w] << (2 * (w % 128 / 32)));
}

// A symmetric scale for n weights on levels -nmax..nmax-1 (ggml's make_qx_quants, weighting by
// x^2): start at max/-nmax, try 18 nearby grids, keep the best least-squares fit. Returns the
// scale; levels are stored offset by nmax.
float fitSymmetricScale(int n, int nmax, const float *x, int8_t *levels) {
  float max = signedAbsMax(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(levels, levels + n, int8_t(0));
    return 0.0f;
  }
  auto fit = [&](float iscale, float *sumLX, float *sumL2, bool store) {
    *sumLX = *sumL2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::clamp(nearestInt(iscale * x[i]), -nmax, nmax - 1);
      if (store)
        levels[i] = int8_t(l + nmax);
      float w = x[i] * x[i];
      *sumLX += w * x[i] * l;
      *sumL2 += w * l * l;
    }
  };
  float sumLX, sumL2;
  fit(-static_cast<float>(nmax) / max, &sumLX, &sumL2, true);
  float scale = sumL2 != 0 ? sumLX / sumL2 : 0.0f;
  float best = scale * sumLX;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0)
      continue;
    float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    fit(iscale, &sumLX, &sumL2, false);
    if (sumL2 > 0 && sumLX * sumLX > best * sumL2) {
      fit(iscale, &sumLX, &sumL2, true);
      scale = sumLX / sumL2;
      best = scale * sumLX;
    }
  }
  return scale;
}

// Q6_K: sixteen 16-weight sub-blocks with a symmetric fit each; the scales are quantized to int8
// against the largest (d = max / -128) and the 6-bit levels recomputed from the stored scales.
void quantQ6_K(const float *x, uint8_t *b) {
  int8_t levels[kQKK];
  float scales[16];
  float maxScale = 0, maxAbsScale = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fitSymmetricScale(16, 32, x + 16 * j, levels + 16 * j);
    if (std::fabs(scales[j]) > maxAbsScale) {
      maxAbsScale = std::fabs(scales[j]);
      maxScale = scales[j];
    }
  }
  std::memset(b, 0, 210);
  if (maxAbsScale < 1e-15f)
    return; // all zero: d = 0 and zero bytes
  float iscale = -128.0f / maxScale;
  storeHalf(b + 208, 1 / iscale);
  int8_t *sc = reinterpret_cast<int8_t *>(b + 192);
  for (int j = 0; j < 16; ++j)
    sc[j] = int8_t(std::clamp(nearestInt(iscale * scales[j]), -128, 127));
  for (int j = 0; j < 16; ++j) {
    float d = loadHalf(b + 208) * static_cast<float>(sc[j]);
    if (d == 0)
      continue;
    for (int l = 16 * j; l < 16 * j + 16; ++l)
      levels[l] = int8_t(std::clamp(nearestInt(x[l] / d), -32, 31) + 32);
  }
  uint8_t *ql = b, *qh = b + 128;
  for (int w = 0; w < kQKK; ++w) {
    int h = w / 128, k = w % 128 / 32, l = w % 32;
    int q = levels[w];
    ql[64 * h + 32 * (k % 2) + l] |= uint8_t((q & 0xf) << (k < 2 ? 0 : 4));
    qh[32 * h + l] |= uint8_t((q >> 4) << (2 * k));
  }
}

// Q3_K: sixteen 16-weight sub-blocks with a symmetric fit on levels -4..3; the scales are
// quantized to 6 bits signed against the largest (d = max / -32), stored offset by 32, and the
// levels recomputed from them. Level+4 goes to the crumbs (low 2 bits) and hmask (bit 2).
void quantQ3_K(const float *x, uint8_t *b) {
  int8_t levels[kQKK];
  float scales[16];
  float maxScale = 0, maxAbsScale = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fitSymmetricScale(16, 4, x + 16 * j, levels + 16 * j);
    if (std::fabs(scales[j]) > maxAbsScale) {
      maxAbsScale = std::fabs(scales[j]);
      maxScale = scales[j];
    }
  }
  std::memset(b, 0, 110);
  uint8_t *hmask = b, *qs = b + 32, *sc = b + 96;
  int stored[16];
  float iscale = maxAbsScale >= 1e-15f ? -32.0f / maxScale : 0.0f;
  for (int j = 0; j < 16; ++j)
    stored[j] = std::clamp(nearestInt(iscale * scales[j]), -32, 31) + 32;
  for (int j = 0; j < 16; ++j) {
    sc[j % 8] |= uint8_t((stored[j] & 0xf) << (j < 8 ? 0 : 4));
    sc[8 + j % 4] |= uint8_t((stored[j] >> 4) << (2 * (j / 4)));
  }
  storeHalf(b + 108, iscale != 0 ? 1 / iscale : 0.0f);
  for (int j = 0; j < 16; ++j) {
    float d = loadHalf(b + 108) * static_cast<float>(q3kScale(sc, j) - 32);
    for (int l = 16 * j; l < 16 * j + 16; ++l)
      levels[l] = d == 0 ? 4 : int8_t(std::clamp(nearestInt(x[l] / d), -4, 3) + 4);
  }
  for (int w = 0; w < kQKK; ++w) {
    int q = levels[w];
    qs[32 * (w / 128) + w % 32] |= uint8_t((q & 3) << (2 * (w % 128 / 32)));
    hmask[w % 32] |= uint8_t(((q >> 2) & 1) << (w / 32));
  }
}

//===----------------------------------------------------------------------===//
// Rows: one table of formats
//===----------------------------------------------------------------------===//

void dequantF32(const uint8_t *b, float *y) { std::memcpy(y, b, 4); }
void dequantF16(const uint8_t *b, float *y) { *y = loadHalf(b); }
void dequantBF16(const uint8_t *b, float *y) { *y = bf16ToFloat(uint16_t(b[0] | (b[1] << 8))); }
void quantF32(const float *x, uint8_t *b) { std::memcpy(b, x, 4); }
void quantF16(const float *x, uint8_t *b) { storeHalf(b, *x); }
void quantBF16(const float *x, uint8_t *b) {
  uint16_t v = floatToBf16(*x);
  b[0] = uint8_t(v & 0xff);
  b[1] = uint8_t(v >> 8);
}
void quantQ4_0(const float *x, uint8_t *b) { quantSymmetric(x, b, 4); }
void quantQ5_0(const float *x, uint8_t *b) { quantSymmetric(x, b, 5); }
void quantQ4_1(const float *x, uint8_t *b) { quantAffine(x, b, 4); }
void quantQ5_1(const float *x, uint8_t *b) { quantAffine(x, b, 5); }
void dequantQ4_K(const uint8_t *b, float *y) { dequantQ45K(b, y, /*fiveBit=*/false); }
void dequantQ5_K(const uint8_t *b, float *y) { dequantQ45K(b, y, /*fiveBit=*/true); }
void quantQ4_K(const float *x, uint8_t *b) { quantQ45K(x, b, /*fiveBit=*/false); }
void quantQ5_K(const float *x, uint8_t *b) { quantQ45K(x, b, /*fiveBit=*/true); }

// One block's worth of each direction; quant is null where quantizeRow cannot write the format.
struct Codec {
  DType dtype;
  void (*dequant)(const uint8_t *block, float *weights);
  void (*quant)(const float *weights, uint8_t *block);
};

constexpr Codec kCodecs[] = {
    {DType::F32, dequantF32, quantF32},    {DType::F16, dequantF16, quantF16},
    {DType::BF16, dequantBF16, quantBF16}, {DType::Q4_0, dequantQ4_0, quantQ4_0},
    {DType::Q4_1, dequantQ4_1, quantQ4_1}, {DType::Q5_0, dequantQ5_0, quantQ5_0},
    {DType::Q5_1, dequantQ5_1, quantQ5_1}, {DType::Q8_0, dequantQ8_0, quantQ8_0},
    {DType::Q2_K, dequantQ2_K, quantQ2_K}, {DType::Q3_K, dequantQ3_K, quantQ3_K},
    {DType::Q4_K, dequantQ4_K, quantQ4_K}, {DType::Q5_K, dequantQ5_K, quantQ5_K},
    {DType::Q6_K, dequantQ6_K, quantQ6_K},
};

const Codec *findCodec(DType dtype) {
  for (const Codec &codec : kCodecs)
    if (codec.dtype == dtype)
      return &codec;
  return nullptr;
}

} // namespace

void dequantizeRow(DType dtype, const uint8_t *src, float *dst, uint64_t nWeights) {
  const Codec *codec = findCodec(dtype);
  assert(codec && "dequantizeRow: dtype is not Supported (checkWeightDType first)");
  if (!codec)
    return;
  const DTypeInfo &info = dtypeInfo(dtype);
  assert(nWeights % info.blockSize == 0 && "dequantizeRow: not a whole number of blocks");
  for (uint64_t i = 0; i < nWeights / info.blockSize; ++i)
    codec->dequant(src + i * info.bytesPerBlock, dst + i * info.blockSize);
}

bool canQuantize(DType dtype) {
  const Codec *codec = findCodec(dtype);
  return codec && codec->quant;
}

absl::Status quantizeRow(DType dtype, const float *src, uint8_t *dst, uint64_t nWeights) {
  if (!canQuantize(dtype))
    return absl::UnimplementedError(
        absl::StrFormat("quantizeRow: cannot quantize to dtype %s", dtypeName(dtype)));
  const DTypeInfo &info = dtypeInfo(dtype);
  if (nWeights % info.blockSize != 0)
    return absl::InvalidArgumentError(
        absl::StrFormat("quantizeRow: %u weights are not a whole number of %s blocks of %u",
                        nWeights, info.name, info.blockSize));
  void (*quant)(const float *, uint8_t *) = findCodec(dtype)->quant;
  for (uint64_t i = 0; i < nWeights / info.blockSize; ++i)
    quant(src + i * info.blockSize, dst + i * info.bytesPerBlock);
  return absl::OkStatus();
}

} // namespace sinter
