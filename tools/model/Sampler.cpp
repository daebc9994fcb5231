// Sampler.cpp - greedy and temperature/top-p sampling.
//
// Top-p sorts only the candidates that can matter: tokens with probability below (1 - p) / (n - 1)
// cannot be in the nucleus (llama2.c's observation), which keeps sorting cheap for 32K
// vocabularies.
#include "tools/model/Sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sinter::model {

uint32_t argmax(absl::Span<const float> logits) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best] || (std::isnan(logits[best]) && !std::isnan(logits[i])))
      best = i;
  }
  return best;
}

Sampler::Sampler(SamplerOptions options) : options_(options), state_(options.seed) {}

double Sampler::uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1p-53;
}

uint32_t Sampler::sample(absl::Span<const float> logits) {
  if (options_.temperature <= 0.0f || logits.size() <= 1)
    return argmax(logits);
  const uint32_t n = uint32_t(logits.size());
  const float maxLogit = logits[argmax(logits)];
  std::vector<double> probs(n);
  double sum = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const double p =
        std::isnan(logits[i]) ? 0.0 : std::exp((logits[i] - maxLogit) / options_.temperature);
    probs[i] = p;
    sum += p;
  }
  for (double &p : probs)
    p /= sum;
  const double r = uniform();
  if (options_.topP <= 0.0f || options_.topP >= 1.0f) {
    double acc = 0;
    for (uint32_t i = 0; i < n; ++i) {
      acc += probs[i];
      if (r < acc)
        return i;
    }
    return n - 1;
  }
  const double cutoff = (1.0 - options_.topP) / double(n - 1);
  std::vector<uint32_t> cand;
  for (uint32_t i = 0; i < n; ++i)
    if (probs[i] >= cutoff)
      cand.push_back(i);
  if (cand.empty()) // possible when topP < 1/n and the distribution is nearly flat
    cand.push_back(argmax(logits));
  std::sort(cand.begin(), cand.end(), [&](uint32_t a, uint32_t b) {
    return probs[a] != probs[b] ? probs[a] > probs[b] : a < b;
  });
  double mass = 0;
  size_t last = cand.size() - 1;
  for (size_t i = 0; i < cand.size(); ++i) {
    mass += probs[cand[i]];
    if (mass > options_.topP) {
      last = i;
      break;
    }
  }
  const double target = r * mass;
  double acc = 0;
  for (size_t i = 0; i <= last; ++i) {
    acc += probs[cand[i]];
    if (target < acc)
      return cand[i];
  }
  return cand[last];
}

} // namespace sinter::model
