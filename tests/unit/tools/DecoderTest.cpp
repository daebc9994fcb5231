// DecoderTest.cpp - tests of tools/model/Decoder.cpp on the reference backend.
//
// The decoder's call stream is pinned (the order of SEMANTICS-level calls an eager engine
// issues), its logits are compared with a host forward pass in double precision over the
// dequantized weights, and its errors and buffer bookkeeping are checked.
#include "tools/model/Decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_join.h"
#include "sinter/Factory.h"
#include "tests/support/BackendKinds.h"
#include "tests/unit/tools/RecordingBackend.h"
#include "tools/model/Synthetic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::model {
namespace {

using ::testing::HasSubstr;
using testing::RecordingBackend;

ModelWeights preset(const std::string &name, DType dtype) {
  SyntheticOptions o;
  o.dtype = dtype;
  absl::StatusOr<ModelWeights> w = generatePreset(name, o);
  EXPECT_TRUE(w.ok()) << w.status();
  return std::move(*w);
}

// A straightforward forward pass in double over dequantized weights (llama2.c's algorithm).
class HostModel {
public:
  explicit HostModel(const ModelWeights &w) : c_(w.config) {
    auto deq = [](const WeightTensor &t) { return *dequantizeTensor(t); };
    emb_ = deq(w.tokenEmbedding);
    cls_ = w.sharedClassifier() ? emb_ : deq(w.output);
    outNorm_ = deq(w.outputNorm);
    for (const LayerWeights &L : w.layers)
      layers_.push_back({deq(L.attnNorm), deq(L.wq), deq(L.wk), deq(L.wv), deq(L.wo),
                         deq(L.ffnNorm), deq(L.gate), deq(L.up), deq(L.down)});
    kc_.assign(c_.nLayers, {});
    vc_.assign(c_.nLayers, {});
  }

  std::vector<double> forward(uint32_t token, uint32_t pos) {
    const uint32_t dim = c_.dim, hd = c_.headDim(), kvDim = c_.kvDim();
    std::vector<double> x(emb_.begin() + size_t(token) * dim,
                          emb_.begin() + size_t(token + 1) * dim);
    for (uint32_t l = 0; l < c_.nLayers; ++l) {
      const Layer &L = layers_[l];
      std::vector<double> xb = norm(x, L.attnNorm);
      std::vector<double> q = mv(L.wq, xb), k = mv(L.wk, xb), v = mv(L.wv, xb);
      rope(q, pos);
      rope(k, pos);
      kc_[l].insert(kc_[l].end(), k.begin(), k.end());
      vc_[l].insert(vc_[l].end(), v.begin(), v.end());
      std::vector<double> att(dim);
      for (uint32_t h = 0; h < c_.nHeads; ++h) {
        const uint32_t kvOff = h / (c_.nHeads / c_.nKvHeads) * hd;
        std::vector<double> s(pos + 1);
        double mx = -1e300, sum = 0;
        for (uint32_t t = 0; t <= pos; ++t) {
          for (uint32_t d = 0; d < hd; ++d)
            s[t] += q[h * hd + d] * kc_[l][t * kvDim + kvOff + d];
          s[t] /= std::sqrt(double(hd));
          mx = std::max(mx, s[t]);
        }
        for (double &e : s)
          sum += (e = std::exp(e - mx));
        for (uint32_t t = 0; t <= pos; ++t)
          for (uint32_t d = 0; d < hd; ++d)
            att[h * hd + d] += s[t] / sum * vc_[l][t * kvDim + kvOff + d];
      }
      std::vector<double> o = mv(L.wo, att);
      for (uint32_t i = 0; i < dim; ++i)
        x[i] += o[i];
      xb = norm(x, L.ffnNorm);
      std::vector<double> g = mv(L.gate, xb), u = mv(L.up, xb);
      for (size_t i = 0; i < g.size(); ++i)
        g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      std::vector<double> d = mv(L.down, g);
      for (uint32_t i = 0; i < dim; ++i)
        x[i] += d[i];
    }
    return mv(cls_, norm(x, outNorm_));
  }

private:
  struct Layer {
    std::vector<float> attnNorm, wq, wk, wv, wo, ffnNorm, gate, up, down;
  };
  std::vector<double> norm(const std::vector<double> &x, const std::vector<float> &w) const {
    double ss = 0;
    for (double v : x)
      ss += v * v;
    const double r = 1 / std::sqrt(ss / x.size() + c_.eps);
    std::vector<double> o(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      o[i] = x[i] * r * w[i];
    return o;
  }
  static std::vector<double> mv(const std::vector<float> &w, const std::vector<double> &x) {
    std::vector<double> o(w.size() / x.size());
    for (size_t r = 0; r < o.size(); ++r)
      for (size_t c = 0; c < x.size(); ++c)
        o[r] += w[r * x.size() + c] * x[c];
    return o;
  }
  void rope(std::vector<double> &v, uint32_t pos) const {
    const uint32_t hd = c_.headDim();
    for (size_t i = 0; i < v.size(); i += 2) {
      const double a = pos * std::pow(double(c_.ropeBase), -double(i % hd) / hd);
      const double x = v[i], y = v[i + 1];
      v[i] = x * std::cos(a) - y * std::sin(a);
      v[i + 1] = x * std::sin(a) + y * std::cos(a);
    }
  }

  ModelConfig c_;
  std::vector<float> emb_, cls_, outNorm_;
  std::vector<Layer> layers_;
  std::vector<std::vector<double>> kc_, vc_;
};

double nmse(const std::vector<float> &out, const std::vector<double> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return num / den;
}

std::unique_ptr<ComputeBackend> reference() {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> b =
      createBackend(sinter::test::backendOptions("reference"));
  EXPECT_TRUE(b.ok()) << b.status();
  return std::move(*b);
}

class DecoderMatchesHost : public ::testing::TestWithParam<DType> {};

TEST_P(DecoderMatchesHost, OverSixPositions) {
  const ModelWeights w = preset("micro", GetParam());
  HostModel host(w);
  auto backend = reference();
  auto decoder = Decoder::create(*backend, w, {8, false});
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  const uint32_t tokens[] = {1, 17, 200, 3, 99, 42};
  for (uint32_t pos = 0; pos < 6; ++pos) {
    absl::StatusOr<std::vector<float>> logits = (*decoder)->step(tokens[pos], pos);
    ASSERT_TRUE(logits.ok()) << logits.status();
    const std::vector<double> ref = host.forward(tokens[pos], pos);
    EXPECT_LT(nmse(*logits, ref), 1e-9) << "pos " << pos;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, DecoderMatchesHost,
                         ::testing::Values(DType::F32, DType::F16, DType::Q8_0, DType::Q4_0,
                                           DType::Q4_K, DType::Q6_K),
                         [](const auto &info) { return dtypeName(info.param); });

TEST(Decoder, MatmulPathAgreesWithQuantizedMatmulF32) {
  const ModelWeights w = preset("nano", DType::F32);
  auto backend = reference();
  auto a = Decoder::create(*backend, w, {4, false});
  auto b = Decoder::create(*backend, w, {4, true});
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint32_t pos = 0; pos < 4; ++pos) {
    std::vector<float> la = *(*a)->step(pos + 3, pos), lb = *(*b)->step(pos + 3, pos);
    std::vector<double> ref(la.begin(), la.end());
    EXPECT_LT(nmse(lb, ref), 1e-12);
  }
}

// The order of calls is part of the contract with the later tests and benchmarks.
TEST(Decoder, IssuesCallsInEngineOrder) {
  const ModelWeights w = preset("nano", DType::Q8_0); // 1 layer, 4 heads, 2 kv heads
  auto inner = reference();
  RecordingBackend rec(*inner);
  auto decoder = Decoder::create(rec, w, {4, false});
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  ASSERT_TRUE((*decoder)->step(1, 0).ok());
  rec.calls.clear();
  ASSERT_TRUE((*decoder)->step(5, 1).ok());
  std::vector<std::string> expected = {"copy_buffer_offset",
                                       "copy_buffer",
                                       "rms_norm",
                                       "quantized_matmul(Q8_0)",
                                       "quantized_matmul(Q8_0)",
                                       "quantized_matmul(Q8_0)",
                                       "rope",
                                       "copy_buffer_offset",
                                       "copy_buffer_offset"};
  for (int h = 0; h < 4; ++h)
    for (const char *op : {"attn_score", "softmax", "attn_value"})
      expected.push_back(op);
  for (const char *op :
       {"quantized_matmul(Q8_0)", "add", "copy_buffer", "rms_norm", "quantized_matmul(Q8_0)",
        "quantized_matmul(Q8_0)", "silu", "element_mul", "quantized_matmul(Q8_0)", "add",
        "rms_norm", "quantized_matmul(Q8_0)", "copy_from_device"})
    expected.push_back(op);
  EXPECT_EQ(absl::StrJoin(rec.names(), " "), absl::StrJoin(expected, " "));
  // Details that carry the layout: the K write at pos 1 and the head-to-KV-head mapping.
  EXPECT_EQ(rec.calls[7].ints, (std::vector<uint64_t>{0, 1 * 16 * 4, 16 * 4})); // kv_dim 16
  const RecordingBackend::Call &score2 = rec.calls[9 + 2 * 3];
  EXPECT_EQ(score2.name, "attn_score");
  // head_dim 8, seq_len 2, head_off 16, kv_off 8 (head 2 -> kv head 1), kv_stride 16.
  EXPECT_EQ(score2.ints, (std::vector<uint64_t>{8, 2, 16, 8, 16}));
}

TEST(Decoder, MatmulOptionIssuesMatmul) {
  const ModelWeights w = preset("nano", DType::F32);
  auto inner = reference();
  RecordingBackend rec(*inner);
  auto decoder = Decoder::create(rec, w, {2, true});
  ASSERT_TRUE(decoder.ok());
  ASSERT_TRUE((*decoder)->step(1, 0).ok());
  EXPECT_EQ(rec.count("matmul"), 8u); // 7 per layer + classifier
  EXPECT_EQ(rec.count("quantized_matmul(F32)"), 0u);
}

TEST(Decoder, RejectsBadTokenPositionAndSpan) {
  const ModelWeights w = preset("nano", DType::F32);
  auto backend = reference();
  auto decoder = Decoder::create(*backend, w, {4, false});
  ASSERT_TRUE(decoder.ok());
  absl::StatusOr<std::vector<float>> r = (*decoder)->step(32, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("token 32 is outside the vocabulary of 32"));
  r = (*decoder)->step(1, 4);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("position 4 is past the context of 4"));
  std::vector<float> small(3);
  EXPECT_EQ((*decoder)->step(1, 0, absl::MakeSpan(small)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Decoder, FreesEveryBufferItAllocated) {
  const ModelWeights w = preset("nano", DType::Q4_0);
  auto inner = reference();
  RecordingBackend rec(*inner);
  {
    auto decoder = Decoder::create(rec, w, {4, false});
    ASSERT_TRUE(decoder.ok());
    ASSERT_TRUE((*decoder)->step(1, 0).ok());
    EXPECT_GT(rec.live(), 10);
  }
  EXPECT_EQ(rec.live(), 0);
}

TEST(Decoder, ReportsAllocationFailureWithTheTensor) {
  const ModelWeights w = preset("micro", DType::F32);
  BackendOptions o;
  o.memoryLimitBytes = 100000;
  auto backend = createBackend(o);
  ASSERT_TRUE(backend.ok());
  auto decoder = Decoder::create(**backend, w, {});
  ASSERT_FALSE(decoder.ok());
  EXPECT_EQ(decoder.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(decoder.status().message()), HasSubstr("decoder: allocating"));
}

TEST(Generate, FeedsThePromptThenSamples) {
  const ModelWeights w = preset("nano", DType::F32);
  auto backend = reference();
  auto decoder = Decoder::create(*backend, w, {16, false});
  ASSERT_TRUE(decoder.ok());
  Sampler greedy({});
  std::vector<uint32_t> fed;
  auto onStep = [&](uint32_t pos, uint32_t token, absl::Span<const float>, uint32_t) {
    EXPECT_EQ(pos, fed.size());
    fed.push_back(token);
    return absl::OkStatus();
  };
  const uint32_t prompt[] = {1, 7, 9};
  absl::StatusOr<std::vector<uint32_t>> out =
      generate(**decoder, prompt, 4, greedy, std::nullopt, onStep);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  ASSERT_EQ(fed.size(), 6u); // 3 prompt tokens + 3 generated ones fed back
  EXPECT_EQ(std::vector<uint32_t>(fed.begin(), fed.begin() + 3), (std::vector<uint32_t>{1, 7, 9}));
  EXPECT_EQ(fed[3], (*out)[0]);
  EXPECT_EQ(fed[5], (*out)[2]);
}

TEST(Generate, StopsAtTheStopTokenAndAtTheContext) {
  const ModelWeights w = preset("nano", DType::F32);
  auto backend = reference();
  auto decoder = Decoder::create(*backend, w, {16, false});
  ASSERT_TRUE(decoder.ok());
  Sampler greedy({});
  const uint32_t prompt[] = {1};
  absl::StatusOr<std::vector<uint32_t>> all = generate(**decoder, prompt, 10, greedy, std::nullopt);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 10u);
  absl::StatusOr<std::vector<uint32_t>> stopped =
      generate(**decoder, prompt, 10, greedy, (*all)[2]);
  ASSERT_TRUE(stopped.ok());
  const size_t first = size_t(std::find(all->begin(), all->end(), (*all)[2]) - all->begin());
  EXPECT_EQ(*stopped, std::vector<uint32_t>(all->begin(), all->begin() + first));
  auto small = Decoder::create(*backend, w, {3, false});
  absl::StatusOr<std::vector<uint32_t>> full = generate(**small, prompt, 10, greedy, std::nullopt);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->size(), 3u); // positions 0..2 each predict one token
  absl::StatusOr<std::vector<uint32_t>> none = generate(**decoder, prompt, 0, greedy, std::nullopt);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

} // namespace
} // namespace sinter::model
