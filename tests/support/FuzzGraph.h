// FuzzGraph.h - the fusion fuzzer's random graphs, issued identically on several backends.
//
// Each graph is a random sequence of ComputeBackend calls over a few small buffers (element-wise
// ops, norms, copies, rope, contractions, attention, frees), shaped so that the fusion patterns
// find their chains often. runFuzzGraph plays graph `seed` on every backend given and reads back
// every buffer still alive at the end; the tests decide how the read-backs must agree (byte for
// byte on the plan interpreter, within a tolerance on compiled kernels).
#ifndef SINTER_TESTS_SUPPORT_FUZZGRAPH_H
#define SINTER_TESTS_SUPPORT_FUZZGRAPH_H

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "sinter/ComputeBackend.h"

namespace sinter::test {

inline constexpr uint32_t kFuzzDim = 16;      ///< floats per vector buffer
inline constexpr uint32_t kFuzzCacheRows = 4; ///< positions in the cache buffer
inline constexpr int kFuzzVectors = 6;

/// What one graph read back: per backend the live vectors (kFuzzDim floats each, in order), then
/// the cache (kFuzzCacheRows * kFuzzDim floats). `error` is set when a backend failed.
struct FuzzGraphResult {
  std::vector<std::vector<uint8_t>> bytes;
  std::string error;
};

/// Plays random graph `seed` on each of `backends` (fresh ones: the graph allocates its own
/// buffers) and reads everything back.
inline FuzzGraphResult runFuzzGraph(uint32_t seed, const std::vector<ComputeBackend *> &all) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
  // Per backend: vectors, a weight matrix (kFuzzDim x kFuzzDim F32), a cache.
  std::vector<std::vector<BufferHandle>> vec(all.size());
  std::vector<BufferHandle> weight(all.size()), cache(all.size());
  std::vector<bool> alive(kFuzzVectors, true);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto upload = [&](std::vector<float> values, auto &&handleOf) {
    for (size_t b = 0; b < all.size(); ++b)
      (void)all[b]->copyToDevice(
          {reinterpret_cast<const uint8_t *>(values.data()), values.size() * 4}, handleOf(b));
  };
  for (size_t b = 0; b < all.size(); ++b) {
    for (int i = 0; i < kFuzzVectors; ++i)
      vec[b].push_back(*all[b]->allocate(kFuzzDim * 4));
    weight[b] = *all[b]->allocate(kFuzzDim * kFuzzDim * 4);
    cache[b] = *all[b]->allocate(kFuzzCacheRows * kFuzzDim * 4);
  }
  for (int i = 0; i < kFuzzVectors; ++i) {
    std::vector<float> v(kFuzzDim);
    for (float &x : v)
      x = dist(rng);
    upload(v, [&](size_t b) { return vec[b][i]; });
  }
  std::vector<float> w(kFuzzDim * kFuzzDim);
  for (float &x : w)
    x = dist(rng) * 0.25f;
  upload(w, [&](size_t b) { return weight[b]; });

  auto live = [&] {
    int i;
    do
      i = pick(kFuzzVectors);
    while (!alive[i]);
    return i;
  };
  constexpr uint32_t D = kFuzzDim;
  int numCalls = 4 + pick(28);
  for (int c = 0; c < numCalls; ++c) {
    int a = live(), x = live(), o = live();
    uint32_t n = 1 + uint32_t(pick(D));
    uint32_t pos = uint32_t(pick(kFuzzCacheRows));
    int kind = pick(14);
    bool wholeCopy = pick(2) == 0; // drawn once: every backend must see the same call
    for (size_t b = 0; b < all.size(); ++b) {
      ComputeBackend &be = *all[b];
      BufferHandle A = vec[b][a], X = vec[b][x], O = vec[b][o];
      switch (kind) {
      case 0:
        (void)be.add(A, X, O, n);
        break;
      case 1:
        (void)be.elementMul(A, X, O, n);
        break;
      case 2:
        (void)be.silu(A, O, n);
        break;
      case 3:
        (void)be.softmax(A, O, n);
        break;
      case 4:
        (void)be.rmsNorm(A, X, O, D, 1e-5f);
        break;
      case 5:
        (void)be.copyBuffer(A, O, wholeCopy ? D * 4 : n * 4);
        break;
      case 6:
        (void)be.copyBufferOffset(A, cache[b], 0, pos * D * 4, D * 4);
        break;
      case 7:
        (void)be.rope(A, X, pos, 4, 10000.0f, D / 4, 1 + n % (D / 4));
        break;
      case 8:
        (void)be.quantizedMatmul(weight[b], A, O, D, D, DType::F32);
        break;
      case 9:
        (void)be.matmul(A, weight[b], O, 1, D, D);
        break;
      case 10:
        (void)be.attnScore(A, cache[b], O, 4, pos + 1, 4 * (n % 4), 4 * (n % 4), D);
        break;
      case 11:
        (void)be.attnValue(A, cache[b], O, 4, pos + 1, 4 * (n % 4), D, 4 * (n % 4));
        break;
      case 12:
        (void)be.copyBufferOffset(cache[b], O, pos * D * 4, 0, D * 4);
        break;
      case 13:
        if (b == 0 && std::count(alive.begin(), alive.end(), true) > 3)
          alive[o] = false;
        if (!alive[o])
          (void)be.free(O);
        break;
      }
    }
    if (pick(8) == 0)
      for (ComputeBackend *be : all)
        (void)be->synchronize();
  }
  FuzzGraphResult result;
  result.bytes.resize(all.size());
  for (size_t b = 0; b < all.size(); ++b) {
    if (absl::Status s = all[b]->synchronize(); !s.ok()) {
      result.error = "synchronize failed on " + all[b]->name() + ": " + std::string(s.message());
      return result;
    }
    std::vector<uint8_t> &bytes = result.bytes[b];
    auto read = [&](BufferHandle h, size_t n) {
      size_t at = bytes.size();
      bytes.resize(at + n);
      (void)all[b]->copyFromDevice(h, {bytes.data() + at, n});
    };
    for (int i = 0; i < kFuzzVectors; ++i)
      if (alive[i])
        read(vec[b][i], D * 4);
    read(cache[b], kFuzzCacheRows * D * 4);
  }
  return result;
}

/// SINTER_FUZZ_GRAPHS, or `defaultCount` when unset.
inline int fuzzGraphCount(int defaultCount) {
  int n = defaultCount;
  if (const char *s = std::getenv("SINTER_FUZZ_GRAPHS"))
    (void)absl::SimpleAtoi(s, &n);
  return n;
}

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_FUZZGRAPH_H
