// SamplerTest.cpp - tests of tools/model/Sampler.cpp.
//
// Greedy is argmax; sampling is seeded and follows the softmax distribution; top-p removes the
// tail exactly as the nucleus definition says.
#include "tools/model/Sampler.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace sinter::model {
namespace {

TEST(Sampler, ArgmaxTakesTheFirstOfEqualMaxima) {
  const std::vector<float> v = {1, 3, 3, 2};
  EXPECT_EQ(argmax(v), 1u);
  EXPECT_EQ(argmax({}), 0u);
}

TEST(Sampler, ArgmaxSkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> v = {nan, -5, nan, -1};
  EXPECT_EQ(argmax(v), 3u);
}

TEST(Sampler, ZeroTemperatureIsGreedy) {
  Sampler s({0.0f, 0.9f, 42});
  const std::vector<float> v = {0.1f, 0.5f, 0.4f};
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(s.sample(v), 1u);
}

std::vector<int> histogram(SamplerOptions o, const std::vector<float> &logits, int n) {
  Sampler s(o);
  std::vector<int> h(logits.size());
  for (int i = 0; i < n; ++i)
    ++h[s.sample(logits)];
  return h;
}

TEST(Sampler, FollowsTheSoftmaxDistribution) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const int n = 20000;
  const std::vector<int> h = histogram({1.0f, 1.0f, 3}, logits, n);
  EXPECT_NEAR(h[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(h[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(h[2] / double(n), 0.2, 0.02);
}

TEST(Sampler, TopPDropsTheTail) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const std::vector<int> h = histogram({1.0f, 0.6f, 5}, logits, 5000);
  EXPECT_GT(h[0], 0);
  EXPECT_GT(h[1], 0);
  EXPECT_EQ(h[2], 0);
  EXPECT_NEAR(h[0] / 5000.0, 0.5 / 0.8, 0.03);
}

TEST(Sampler, TinyTopPIsGreedy) {
  std::vector<float> flat(1000, 0.0f);
  flat[617] = 1e-3f;
  const std::vector<int> h = histogram({1.0f, 1e-6f, 9}, flat, 50);
  EXPECT_EQ(h[617], 50);
}

TEST(Sampler, SameSeedSameChoices) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i)
    logits[i] = std::sin(float(i));
  Sampler a({0.8f, 0.9f, 11}), b({0.8f, 0.9f, 11}), c({0.8f, 0.9f, 12});
  std::vector<uint32_t> ta, tb, tc;
  for (int i = 0; i < 50; ++i) {
    ta.push_back(a.sample(logits));
    tb.push_back(b.sample(logits));
    tc.push_back(c.sample(logits));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

} // namespace
} // namespace sinter::model
