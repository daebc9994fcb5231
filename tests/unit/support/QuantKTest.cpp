// QuantKTest.cpp - tests of the K-quant super-block formats (Q2_K .. Q6_K) in support/Quant.cpp.
//
// Each block is built byte by byte from the GGUF layout: packers below write a quant, a scale or
// a min where the format definition puts it, and the expected weight is the format's formula
// with the scale products taken first, as ggml does: y = (d * sc) * q - (dmin * m).
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "QuantTestUtil.h"
#include "support/Quant.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using test::dequantize;
using test::putHalf;
using test::putHalfBits;

constexpr float kHalfMax = 65504.0f;

// Q2_K/Q3_K qs[64]: weight w in byte 32*(w/128) + w%32, bits 2*((w%128)/32).
void setCrumb(uint8_t *qs, int w, int v) {
  qs[32 * (w / 128) + w % 32] |= uint8_t(v << (2 * (w % 128 / 32)));
}

// Q3_K 6-bit scale j: low nibble in byte j%8 (high nibble for j >= 8), top 2 bits in byte
// 8 + j%4 at bit 2*(j/4).
void setQ3Scale(uint8_t *s, int j, int v) {
  s[j % 8] |= uint8_t((v & 0xf) << (j < 8 ? 0 : 4));
  s[8 + j % 4] |= uint8_t((v >> 4) << (2 * (j / 4)));
}

// The sixteen Q3_K scales the way ggml unpacks them: three little-endian words shuffled with
// kmask1 = 0x03030303 and kmask2 = 0x0f0f0f0f. An independent derivation of setQ3Scale's layout.
std::vector<int> q3ScalesByKmask(const uint8_t *s) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, s, 12);
  uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  uint8_t bytes[16];
  std::memcpy(bytes, aux, 16);
  return std::vector<int>(bytes, bytes + 16);
}

// Q4_K/Q5_K scales[12]: bytes 0..3 = scale j (6 bits) | top 2 bits of scale j+4; bytes 4..7 =
// min j | top 2 bits of min j+4; bytes 8..11 = low nibbles of scale j+4 and min j+4.
void setScaleMin(uint8_t *s, int j, int sc, int m) {
  if (j < 4) {
    s[j] |= uint8_t(sc);
    s[j + 4] |= uint8_t(m);
    return;
  }
  s[j + 4] |= uint8_t((sc & 0xf) | (m & 0xf) << 4);
  s[j - 4] |= uint8_t((sc >> 4) << 6);
  s[j] |= uint8_t((m >> 4) << 6);
}

// Q4_K/Q5_K qs[128]: weight w in byte 32*(w/64) + w%32, low nibble when w%64 < 32.
void setKNibble(uint8_t *qs, int w, int v) {
  qs[32 * (w / 64) + w % 32] |= uint8_t(v << (w % 64 < 32 ? 0 : 4));
}

// Q6_K: weight w = 128h + 32k + l, low 4 bits in ql[64h + 32*(k%2) + l] (high nibble for k >= 2),
// top 2 bits in qh[32h + l] at bit 2k.
void setQ6(uint8_t *ql, uint8_t *qh, int w, int v) {
  int h = w / 128, k = w % 128 / 32, l = w % 32;
  ql[64 * h + 32 * (k % 2) + l] |= uint8_t((v & 0xf) << (k < 2 ? 0 : 4));
  qh[32 * h + l] |= uint8_t((v >> 4) << (2 * k));
}

TEST(QuantKTest, Q2_KBlock) {
  std::vector<uint8_t> b(84);
  uint8_t *scales = &b[0], *qs = &b[16];
  for (int j = 0; j < 16; ++j)
    scales[j] = uint8_t(j | (15 - j) << 4); // scale j, min 15 - j
  for (int w = 0; w < 256; ++w)
    setCrumb(qs, w, (w * 7) % 4);
  putHalf(&b[80], 0.5f);
  putHalf(&b[82], 0.25f);
  std::vector<float> y = dequantize(DType::Q2_K, b);
  for (int w = 0; w < 256; ++w) {
    int j = w / 16;
    EXPECT_EQ(y[w], (0.5f * j) * float((w * 7) % 4) - 0.25f * (15 - j)) << w;
  }
  // Spot checks on raw bytes: byte 0 = 0b11100100 holds weights 0, 32, 64, 96 = 0, 1, 2, 3.
  std::fill(qs, qs + 64, 0);
  qs[0] = 0xe4;
  qs[32 + 5] = 0x03; // weight 128 + 5 = 3
  y = dequantize(DType::Q2_K, b);
  EXPECT_EQ(y[0], 0.5f * 0 * 0 - 0.25f * 15);
  EXPECT_EQ(y[32], 0.5f * 2 * 1 - 0.25f * 13);
  EXPECT_EQ(y[64], 0.5f * 4 * 2 - 0.25f * 11);
  EXPECT_EQ(y[96], 0.5f * 6 * 3 - 0.25f * 9);
  EXPECT_EQ(y[133], 0.5f * 8 * 3 - 0.25f * 7);
  // Zero d and dmin: all zero. Negative d, fp16-max dmin, max scale and quant.
  putHalf(&b[80], 0.0f);
  putHalf(&b[82], 0.0f);
  for (float v : dequantize(DType::Q2_K, b))
    EXPECT_EQ(v, 0.0f);
  scales[0] = 0xff; // scale 15, min 15
  qs[0] = 0xe7;     // weight 0: quant 3
  putHalf(&b[80], -2.0f);
  putHalfBits(&b[82], 0x7bff);
  EXPECT_EQ(dequantize(DType::Q2_K, b)[0], (-2.0f * 15) * 3 - kHalfMax * 15);
}

TEST(QuantKTest, Q3_KScaleLayoutMatchesKmaskUnpacking) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    uint8_t s[12] = {};
    int want[16];
    for (int j = 0; j < 16; ++j) {
      want[j] = int(rng() % 64);
      setQ3Scale(s, j, want[j]);
    }
    std::vector<int> got = q3ScalesByKmask(s);
    for (int j = 0; j < 16; ++j)
      ASSERT_EQ(got[j], want[j]) << "scale " << j;
  }
}

TEST(QuantKTest, Q3_KBlock) {
  std::vector<uint8_t> b(110);
  uint8_t *hmask = &b[0], *qs = &b[32], *scales = &b[96];
  int sc[16];
  for (int j = 0; j < 16; ++j)
    sc[j] = (j * 11 + 3) % 64; // 6-bit scales; the weight multiplier is sc - 32
  sc[5] = 0;                   // the extremes: -32 and +31
  sc[6] = 63;
  for (int j = 0; j < 16; ++j)
    setQ3Scale(scales, j, sc[j]);
  for (int w = 0; w < 256; ++w) {
    setCrumb(qs, w, (w * 5) % 4);
    if (w % 3 == 0)
      hmask[w % 32] |= uint8_t(1 << (w / 32)); // high bit set: no -4
  }
  putHalf(&b[108], 0.125f);
  std::vector<float> y = dequantize(DType::Q3_K, b);
  for (int w = 0; w < 256; ++w) {
    int q = (w * 5) % 4 - (w % 3 == 0 ? 0 : 4);
    EXPECT_EQ(y[w], (0.125f * float(sc[w / 16] - 32)) * float(q)) << w;
  }
  EXPECT_EQ(y[82], 0.125f * -32 * (2 - 4));  // w = 82: crumb 2, no high bit
  EXPECT_EQ(y[6 * 16], 0.125f * 31 * 0);     // w = 96: crumb 0, high bit (96 % 3 == 0)
  EXPECT_EQ(y[6 * 16 + 3], 0.125f * 31 * 3); // w = 99: crumb 3, high bit
  // Spot check on raw bytes: hmask[5] bit 3 is the high bit of weight 3*32 + 5 = 101.
  std::fill(hmask, hmask + 32, 0);
  std::fill(qs, qs + 64, 0);
  hmask[5] = 0x08;
  y = dequantize(DType::Q3_K, b);
  EXPECT_EQ(y[101], 0.0f);                         // q = 0 - 0
  EXPECT_EQ(y[100], (0.125f * (sc[6] - 32)) * -4); // q = 0 - 4
  putHalfBits(&b[108], 0xfbff);                    // d = -65504
  EXPECT_EQ(dequantize(DType::Q3_K, b)[100], (-kHalfMax * 31) * -4);
}

// Fills a Q4_K or Q5_K block (`fiveBit` selects Q5_K) with scales, mins and quants from `rng`.
struct KBlock {
  std::vector<uint8_t> bytes;
  int sc[8], m[8], q[256];
};

KBlock makeQ45K(bool fiveBit, float d, float dmin, std::mt19937 &rng) {
  KBlock k;
  k.bytes.assign(fiveBit ? 176 : 144, 0);
  uint8_t *b = k.bytes.data();
  putHalf(b, d);
  putHalf(b + 2, dmin);
  for (int j = 0; j < 8; ++j) {
    k.sc[j] = j == 7 ? 63 : int(rng() % 64);
    k.m[j] = j == 7 ? 63 : int(rng() % 64);
    setScaleMin(b + 4, j, k.sc[j], k.m[j]);
  }
  uint8_t *qh = b + 16, *qs = fiveBit ? b + 48 : b + 16;
  for (int w = 0; w < 256; ++w) {
    k.q[w] = w == 255 ? (fiveBit ? 31 : 15) : int(rng() % (fiveBit ? 32 : 16));
    setKNibble(qs, w, k.q[w] & 0xf);
    if (fiveBit && k.q[w] >= 16)
      qh[w % 32] |= uint8_t(1 << (w / 32));
  }
  return k;
}

TEST(QuantKTest, Q4_KAndQ5_KBlocks) {
  std::mt19937 rng(5);
  struct Scales {
    uint16_t d, dmin;
  } cases[] = {{0x3800, 0x3400},  // 0.5, 0.25
               {0x3555, 0x2e66},  // values whose products round
               {0xc000, 0x3c00},  // negative d
               {0x7bff, 0x7bff},  // fp16 max
               {0x0001, 0x0003},  // subnormal
               {0x0000, 0x0000}}; // zero
  for (bool fiveBit : {false, true}) {
    DType dtype = fiveBit ? DType::Q5_K : DType::Q4_K;
    for (const Scales &c : cases) {
      float d = halfToFloat(c.d), dmin = halfToFloat(c.dmin);
      KBlock k = makeQ45K(fiveBit, d, dmin, rng);
      std::vector<float> y = dequantize(dtype, k.bytes);
      for (int w = 0; w < 256; ++w) {
        int j = w / 32;
        float expected = (d * float(k.sc[j])) * float(k.q[w]) - dmin * float(k.m[j]);
        ASSERT_EQ(y[w], expected) << dtypeName(dtype) << " d " << c.d << " weight " << w;
      }
    }
  }
}

TEST(QuantKTest, Q4_KRawBytes) {
  std::vector<uint8_t> b(144);
  putHalf(&b[0], 1.0f);
  putHalf(&b[2], 0.5f);
  // Sub-block 0: scale 2, min 3 (bytes 0 and 4); sub-block 5: scale 0x2a = 42 (low nibble 0xa in
  // byte 9, top bits 0b10 in byte 1), min 0x17 = 23 (high nibble 7 in byte 9, top bits 0b01 in
  // byte 5).
  b[4 + 0] = 2;
  b[4 + 4] = 3;
  b[4 + 9] = 0x7a;
  b[4 + 1] = 0x80;
  b[4 + 5] = 0x40;
  b[16 + 0] = 0x21;  // weight 0 = 1, weight 32 = 2
  b[16 + 64] = 0xf4; // chunk 2: weight 128 = 4, weight 160 (sub-block 5) = 15
  std::vector<float> y = dequantize(DType::Q4_K, b);
  EXPECT_EQ(y[0], 2.0f * 1 - 0.5f * 3);
  EXPECT_EQ(y[1], 2.0f * 0 - 0.5f * 3);
  EXPECT_EQ(y[32], 0.0f * 2 - 0.0f); // sub-block 1: scale byte 1 low bits 0, min byte 5 low 0
  EXPECT_EQ(y[160], 42.0f * 15 - 0.5f * 23);
  EXPECT_EQ(y[161], 42.0f * 0 - 0.5f * 23);
  EXPECT_EQ(y[128], 0.0f * 4 - 0.0f); // sub-block 4: byte 8 is zero
}

TEST(QuantKTest, Q6_KBlock) {
  std::mt19937 rng(6);
  for (uint16_t dBits : {uint16_t(0x3400), uint16_t(0x3555), uint16_t(0xbc00), uint16_t(0x7bff),
                         uint16_t(0x0001), uint16_t(0x0000)}) {
    std::vector<uint8_t> b(210);
    int8_t sc[16];
    int q[256];
    for (int j = 0; j < 16; ++j) {
      sc[j] = j == 0 ? int8_t(-128) : j == 1 ? int8_t(127) : int8_t(rng());
      b[192 + j] = uint8_t(sc[j]);
    }
    for (int w = 0; w < 256; ++w) {
      q[w] = w == 0 ? 0 : w == 1 ? 63 : int(rng() % 64); // stored 0..63, value q - 32
      setQ6(&b[0], &b[128], w, q[w]);
    }
    putHalfBits(&b[208], dBits);
    float d = halfToFloat(dBits);
    std::vector<float> y = dequantize(DType::Q6_K, b);
    for (int w = 0; w < 256; ++w)
      ASSERT_EQ(y[w], (d * float(sc[w / 16])) * float(q[w] - 32)) << "d " << dBits << " w " << w;
    EXPECT_EQ(y[0], (d * -128) * -32);
    EXPECT_EQ(y[1], (d * -128) * 31);
  }
}

TEST(QuantKTest, Q6_KRawBytes) {
  std::vector<uint8_t> b(210);
  putHalf(&b[208], 0.5f);
  for (int j = 0; j < 16; ++j)
    b[192 + j] = uint8_t(j + 1);
  b[0] = 0x21;            // low bits: weight 0 = 1, weight 64 = 2
  b[32] = 0x43;           // weight 32 = 3, weight 96 = 4
  b[128] = 0xe4;          // high bits: weight 0 = 0, 32 = 1, 64 = 2, 96 = 3
  b[64 + 7] = 0x05;       // second half, low bits of weight 128 + 7 = 5
  b[128 + 32 + 7] = 0x01; // its high bits = 1
  std::vector<float> y = dequantize(DType::Q6_K, b);
  EXPECT_EQ(y[0], 0.5f * 1 * (1 - 32));
  EXPECT_EQ(y[32], 0.5f * 3 * ((3 | 16) - 32));
  EXPECT_EQ(y[64], 0.5f * 5 * ((2 | 32) - 32));
  EXPECT_EQ(y[96], 0.5f * 7 * ((4 | 48) - 32));
  EXPECT_EQ(y[135], 0.5f * 9 * ((5 | 16) - 32));
  EXPECT_EQ(y[1], 0.5f * 1 * -32);
}

TEST(QuantKTest, SeveralSuperBlocksInARow) {
  std::mt19937 rng(9);
  KBlock a = makeQ45K(false, 0.5f, 0.25f, rng), c = makeQ45K(false, -1.0f, 2.0f, rng);
  std::vector<uint8_t> row(a.bytes);
  row.insert(row.end(), c.bytes.begin(), c.bytes.end());
  std::vector<float> y = dequantize(DType::Q4_K, row);
  std::vector<float> ya = dequantize(DType::Q4_K, a.bytes), yc = dequantize(DType::Q4_K, c.bytes);
  ASSERT_EQ(y.size(), 512u);
  EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 256), ya);
  EXPECT_EQ(std::vector<float>(y.begin() + 256, y.end()), yc);
}

} // namespace
} // namespace sinter
