// ReferenceAttentionTest.cpp - rope, attn_score and attn_value on the reference backend.
//
// The attention ops address a [position][kv_head][head_dim] cache with offsets and strides, so
// besides hand-checked values these tests walk grouped-query layouts (several query heads per KV
// head) and check that heads and elements outside the named ones are never touched.
#include <cmath>
#include <random>

#include "backends/ReferenceBackend.h"
#include "tests/support/Nmse.h"
#include "tests/support/TestData.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter {
namespace {

using test::downloadFloats;
using test::expectNmse;
using test::isPoison;
using test::poisonBytes;
using test::poisonedFloats;
using test::randomFloats;
using test::uploadFloats;
using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

class ReferenceAttentionTest : public ::testing::Test {
protected:
  ReferenceBackend backend;
  std::mt19937 rng{99};
};

// Double-precision rope of `nHeads` heads of x, as SEMANTICS.md writes it.
std::vector<double> ropeRef(const std::vector<float> &x, uint32_t pos, uint32_t headDim,
                            double freqBase, uint32_t nHeads) {
  std::vector<double> out(x.begin(), x.end());
  for (uint32_t h = 0; h < nHeads; ++h)
    for (uint32_t i = 0; i < headDim / 2; ++i) {
      double angle = pos * std::pow(freqBase, -2.0 * i / headDim);
      size_t e = size_t(h) * headDim + 2 * i;
      out[e] = x[e] * std::cos(angle) - x[e + 1] * std::sin(angle);
      out[e + 1] = x[e] * std::sin(angle) + x[e + 1] * std::cos(angle);
    }
  return out;
}

TEST_F(ReferenceAttentionTest, RopeByHand) {
  // head_dim 4, pos 1, base 10000: pair 0 turns by 1 rad, pair 1 by 10000^(-1/2) = 0.01 rad.
  BufferHandle q = uploadFloats(backend, {1, 0, 0, 1, 1, 0, 0, 1});
  BufferHandle k = uploadFloats(backend, {1, 0, 0, 1, 5, 6, 7, 8});
  ASSERT_EQ(backend.rope(q, k, 1, 4, 10000.0f, 2, 1), absl::OkStatus());
  std::vector<float> head = {0.5403023059f, 0.8414709848f, -0.0099998333f, 0.9999500004f};
  std::vector<float> twoHeads = head;
  twoHeads.insert(twoHeads.end(), head.begin(), head.end());
  EXPECT_THAT(downloadFloats(backend, q, 8), Pointwise(FloatNear(1e-7f), twoHeads));
  std::vector<float> kGot = downloadFloats(backend, k, 8);
  EXPECT_THAT(std::vector<float>(kGot.begin(), kGot.begin() + 4),
              Pointwise(FloatNear(1e-7f), head));
  EXPECT_THAT(std::vector<float>(kGot.begin() + 4, kGot.end()), ElementsAre(5, 6, 7, 8))
      << "k head beyond n_heads_k was rotated";
}

TEST_F(ReferenceAttentionTest, RopeAtPositionZeroIsIdentity) {
  std::vector<float> x = randomFloats(16, rng);
  BufferHandle q = uploadFloats(backend, x), k = uploadFloats(backend, x);
  ASSERT_EQ(backend.rope(q, k, 0, 8, 10000.0f, 2, 2), absl::OkStatus());
  EXPECT_EQ(downloadFloats(backend, q, 16), x);
  EXPECT_EQ(downloadFloats(backend, k, 16), x);
}

TEST_F(ReferenceAttentionTest, RopeRandomRotatesExactlyTheNamedHeads) {
  const uint32_t headDim = 16, nq = 4, nk = 2, pos = 17;
  const float base = 500000.0f;
  // One extra head in each buffer, poisoned: it must survive.
  std::vector<float> qx = randomFloats(nq * headDim, rng), kx = randomFloats(nk * headDim, rng);
  std::vector<float> qInit = qx, kInit = kx;
  std::vector<float> poisonHead = test::bytesFloats(poisonBytes(headDim * 4));
  qInit.insert(qInit.end(), poisonHead.begin(), poisonHead.end());
  kInit.insert(kInit.end(), poisonHead.begin(), poisonHead.end());
  BufferHandle q = uploadFloats(backend, qInit), k = uploadFloats(backend, kInit);
  ASSERT_EQ(backend.rope(q, k, pos, headDim, base, nq, nk), absl::OkStatus());
  std::vector<float> qGot = downloadFloats(backend, q, (nq + 1) * headDim);
  std::vector<float> kGot = downloadFloats(backend, k, (nk + 1) * headDim);
  expectNmse(absl::MakeSpan(qGot).subspan(0, nq * headDim), ropeRef(qx, pos, headDim, base, nq));
  expectNmse(absl::MakeSpan(kGot).subspan(0, nk * headDim), ropeRef(kx, pos, headDim, base, nk));
  for (uint32_t d = 0; d < headDim; ++d) {
    EXPECT_TRUE(isPoison(qGot[nq * headDim + d])) << "q element " << nq * headDim + d;
    EXPECT_TRUE(isPoison(kGot[nk * headDim + d])) << "k element " << nk * headDim + d;
  }
}

TEST_F(ReferenceAttentionTest, RopeWithNoKHeadsLeavesKAlone) {
  std::vector<float> x = randomFloats(8, rng);
  BufferHandle q = uploadFloats(backend, x), k = uploadFloats(backend, x);
  ASSERT_EQ(backend.rope(q, k, 3, 8, 10000.0f, 1, 0), absl::OkStatus());
  EXPECT_EQ(downloadFloats(backend, k, 8), x);
  expectNmse(downloadFloats(backend, q, 8), ropeRef(x, 3, 8, 10000.0, 1));
}

TEST_F(ReferenceAttentionTest, AttnScoreByHand) {
  // q head 1 is (3, 4); the cache has kv_stride 4 and the head at kv_offset 2.
  BufferHandle q = uploadFloats(backend, {1, 2, 3, 4});
  BufferHandle kc = uploadFloats(backend, {9, 9, 1, 0, 9, 9, 0, 1});
  BufferHandle scores = poisonedFloats(backend, 3);
  ASSERT_EQ(backend.attnScore(q, kc, scores, 2, 2, 2, 2, 4), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, scores, 3);
  EXPECT_NEAR(got[0], 3.0 / std::sqrt(2.0), 1e-6); // 2.1213203
  EXPECT_NEAR(got[1], 4.0 / std::sqrt(2.0), 1e-6); // 2.8284271
  EXPECT_TRUE(isPoison(got[2]));
}

TEST_F(ReferenceAttentionTest, AttnValueByHandOverwritesOnlyItsSlice) {
  BufferHandle w = uploadFloats(backend, {0.25f, 0.75f});
  BufferHandle vc = uploadFloats(backend, {9, 9, 4, 8, 9, 9, 8, 4});
  BufferHandle out = poisonedFloats(backend, 4);
  ASSERT_EQ(backend.attnValue(w, vc, out, 2, 2, 2, 4, 1), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, 4);
  EXPECT_TRUE(isPoison(got[0]) && isPoison(got[3]));
  EXPECT_EQ(got[1], 7.0f); // 0.25*4 + 0.75*8
  EXPECT_EQ(got[2], 5.0f); // 0.25*8 + 0.75*4
}

TEST_F(ReferenceAttentionTest, AttnValueOverSeqLenZeroWritesZeros) {
  BufferHandle w = uploadFloats(backend, {}), vc = uploadFloats(backend, {});
  BufferHandle out = poisonedFloats(backend, 3);
  ASSERT_EQ(backend.attnValue(w, vc, out, 2, 0, 0, 2, 1), absl::OkStatus());
  std::vector<float> got = downloadFloats(backend, out, 3);
  EXPECT_TRUE(isPoison(got[0]));
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_EQ(got[2], 0.0f);
}

// A grouped-query layout: 8 query heads share 2 KV heads; the cache is [pos][kv_head][head_dim].
struct GqaLayout {
  uint32_t nHeads = 8, nKvHeads = 2, headDim = 16, seqLen = 11;
  uint32_t kvStride() const { return nKvHeads * headDim; }
  uint32_t kvHeadOf(uint32_t h) const { return h / (nHeads / nKvHeads); }
};

TEST_F(ReferenceAttentionTest, AttnScoreGqaMatchesDoublePerHead) {
  GqaLayout g;
  std::vector<float> q = randomFloats(g.nHeads * g.headDim, rng);
  std::vector<float> kc = randomFloats(g.seqLen * g.kvStride(), rng);
  BufferHandle hq = uploadFloats(backend, q), hk = uploadFloats(backend, kc);
  for (uint32_t h = 0; h < g.nHeads; ++h) {
    SCOPED_TRACE(h);
    BufferHandle scores = poisonedFloats(backend, g.seqLen + 1);
    uint32_t kvOff = g.kvHeadOf(h) * g.headDim;
    ASSERT_EQ(
        backend.attnScore(hq, hk, scores, g.headDim, g.seqLen, h * g.headDim, kvOff, g.kvStride()),
        absl::OkStatus());
    std::vector<double> ref(g.seqLen);
    for (uint32_t t = 0; t < g.seqLen; ++t) {
      for (uint32_t d = 0; d < g.headDim; ++d)
        ref[t] += double(q[h * g.headDim + d]) * kc[t * g.kvStride() + kvOff + d];
      ref[t] /= std::sqrt(double(g.headDim));
    }
    std::vector<float> got = downloadFloats(backend, scores, g.seqLen + 1);
    EXPECT_TRUE(isPoison(got.back()));
    got.pop_back();
    expectNmse(got, ref);
  }
}

TEST_F(ReferenceAttentionTest, AttnValueGqaFillsEachHeadSlice) {
  GqaLayout g;
  std::vector<float> vc = randomFloats(g.seqLen * g.kvStride(), rng);
  BufferHandle hv = uploadFloats(backend, vc);
  BufferHandle out = poisonedFloats(backend, g.nHeads * g.headDim + 1);
  std::vector<double> ref(g.nHeads * g.headDim);
  for (uint32_t h = 0; h < g.nHeads; ++h) {
    std::vector<float> w = randomFloats(g.seqLen, rng, 0.0f, 1.0f);
    BufferHandle hw = uploadFloats(backend, w);
    uint32_t kvOff = g.kvHeadOf(h) * g.headDim;
    ASSERT_EQ(
        backend.attnValue(hw, hv, out, g.headDim, g.seqLen, kvOff, g.kvStride(), h * g.headDim),
        absl::OkStatus());
    for (uint32_t d = 0; d < g.headDim; ++d)
      for (uint32_t t = 0; t < g.seqLen; ++t)
        ref[h * g.headDim + d] += double(w[t]) * vc[t * g.kvStride() + kvOff + d];
  }
  std::vector<float> got = downloadFloats(backend, out, g.nHeads * g.headDim + 1);
  EXPECT_TRUE(isPoison(got.back()));
  got.pop_back();
  expectNmse(got, ref);
}

TEST_F(ReferenceAttentionTest, ScoreSoftmaxValueChainMatchesDouble) {
  GqaLayout g;
  g.nHeads = 2;
  g.nKvHeads = 1;
  std::vector<float> q = randomFloats(g.headDim, rng);
  std::vector<float> kc = randomFloats(g.seqLen * g.kvStride(), rng);
  std::vector<float> vc = randomFloats(g.seqLen * g.kvStride(), rng);
  BufferHandle hq = uploadFloats(backend, q), hk = uploadFloats(backend, kc);
  BufferHandle hv = uploadFloats(backend, vc), scores = poisonedFloats(backend, g.seqLen);
  BufferHandle out = poisonedFloats(backend, g.headDim);
  ASSERT_EQ(backend.attnScore(hq, hk, scores, g.headDim, g.seqLen, 0, 0, g.kvStride()),
            absl::OkStatus());
  ASSERT_EQ(backend.softmax(scores, scores, g.seqLen), absl::OkStatus());
  ASSERT_EQ(backend.attnValue(scores, hv, out, g.headDim, g.seqLen, 0, g.kvStride(), 0),
            absl::OkStatus());
  std::vector<double> s(g.seqLen), ref(g.headDim);
  double maxScore = -INFINITY, sum = 0.0;
  for (uint32_t t = 0; t < g.seqLen; ++t) {
    for (uint32_t d = 0; d < g.headDim; ++d)
      s[t] += double(q[d]) * kc[t * g.kvStride() + d];
    s[t] /= std::sqrt(double(g.headDim));
    maxScore = std::max(maxScore, s[t]);
  }
  for (double &v : s)
    sum += (v = std::exp(v - maxScore));
  for (uint32_t d = 0; d < g.headDim; ++d)
    for (uint32_t t = 0; t < g.seqLen; ++t)
      ref[d] += s[t] / sum * vc[t * g.kvStride() + d];
  expectNmse(downloadFloats(backend, out, g.headDim), ref);
}

} // namespace
} // namespace sinter
