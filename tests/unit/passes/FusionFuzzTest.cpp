// FusionFuzzTest.cpp - random call sequences run fused and unfused must give the same bytes.
//
// Each graph is a random sequence of ComputeBackend calls over a few small buffers (element-wise
// ops, norms, copies, rope, contractions, attention, frees), shaped so that the fusion patterns
// find their chains often. It runs on the lazy backend with the fusion pipeline and with fusion
// off, both on the plan interpreter, and on the reference backend; every live buffer must match
// byte for byte (the interpreter runs the same reference kernels, so a difference is a pass that
// changed what the program computes). 500 graphs by default; SINTER_FUZZ_GRAPHS=N for more (the
// long mode runs 10000).
#include <cstdlib>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "sinter/Factory.h"

namespace sinter {
namespace {

constexpr uint32_t kDim = 16;      // floats per vector buffer
constexpr uint32_t kCacheRows = 4; // positions in the cache buffer
constexpr int kVectors = 6;

struct Backends {
  std::unique_ptr<ComputeBackend> fused, unfused, reference;
  std::vector<ComputeBackend *> all() { return {fused.get(), unfused.get(), reference.get()}; }
};

Backends makeBackends() {
  Backends b;
  BackendOptions o;
  o.kind = "lazy";
  // SINTER_DISABLE_FUSION applies to the fused backend, to bisect a failure to one pattern.
  b.fused = *createBackend(*optionsFromEnvironment(o));
  o.fusion = false;
  b.unfused = *createBackend(o);
  b.reference = *createBackend(BackendOptions{});
  return b;
}

// One random graph, issued identically on every backend. Returns a description on mismatch.
std::string runGraph(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
  Backends backends = makeBackends();
  std::vector<ComputeBackend *> all = backends.all();
  // Per backend: vectors, a weight matrix (kDim x kDim F32), a cache.
  std::vector<std::vector<BufferHandle>> vec(all.size());
  std::vector<BufferHandle> weight(all.size()), cache(all.size());
  std::vector<bool> alive(kVectors, true);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto upload = [&](std::vector<float> values, auto &&handleOf) {
    for (size_t b = 0; b < all.size(); ++b)
      (void)all[b]->copyToDevice(
          {reinterpret_cast<const uint8_t *>(values.data()), values.size() * 4}, handleOf(b));
  };
  for (size_t b = 0; b < all.size(); ++b) {
    for (int i = 0; i < kVectors; ++i)
      vec[b].push_back(*all[b]->allocate(kDim * 4));
    weight[b] = *all[b]->allocate(kDim * kDim * 4);
    cache[b] = *all[b]->allocate(kCacheRows * kDim * 4);
  }
  for (int i = 0; i < kVectors; ++i) {
    std::vector<float> v(kDim);
    for (float &x : v)
      x = dist(rng);
    upload(v, [&](size_t b) { return vec[b][i]; });
  }
  std::vector<float> w(kDim * kDim);
  for (float &x : w)
    x = dist(rng) * 0.25f;
  upload(w, [&](size_t b) { return weight[b]; });

  auto live = [&] {
    int i;
    do
      i = pick(kVectors);
    while (!alive[i]);
    return i;
  };
  int numCalls = 4 + pick(28);
  for (int c = 0; c < numCalls; ++c) {
    int a = live(), x = live(), o = live();
    uint32_t n = 1 + uint32_t(pick(kDim));
    uint32_t pos = uint32_t(pick(kCacheRows));
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
        (void)be.rmsNorm(A, X, O, kDim, 1e-5f);
        break;
      case 5:
        (void)be.copyBuffer(A, O, wholeCopy ? kDim * 4 : n * 4);
        break;
      case 6:
        (void)be.copyBufferOffset(A, cache[b], 0, pos * kDim * 4, kDim * 4);
        break;
      case 7:
        (void)be.rope(A, X, pos, 4, 10000.0f, kDim / 4, 1 + n % (kDim / 4));
        break;
      case 8:
        (void)be.quantizedMatmul(weight[b], A, O, kDim, kDim, DType::F32);
        break;
      case 9:
        (void)be.matmul(A, weight[b], O, 1, kDim, kDim);
        break;
      case 10:
        (void)be.attnScore(A, cache[b], O, 4, pos + 1, 4 * (n % 4), 4 * (n % 4), kDim);
        break;
      case 11:
        (void)be.attnValue(A, cache[b], O, 4, pos + 1, 4 * (n % 4), kDim, 4 * (n % 4));
        break;
      case 12:
        (void)be.copyBufferOffset(cache[b], O, pos * kDim * 4, 0, kDim * 4);
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
  std::vector<std::vector<uint8_t>> bytes(all.size());
  for (size_t b = 0; b < all.size(); ++b) {
    if (absl::Status s = all[b]->synchronize(); !s.ok())
      return "synchronize failed on " + all[b]->name() + ": " + std::string(s.message());
    auto read = [&](BufferHandle h, size_t n) {
      size_t at = bytes[b].size();
      bytes[b].resize(at + n);
      (void)all[b]->copyFromDevice(h, {bytes[b].data() + at, n});
    };
    for (int i = 0; i < kVectors; ++i)
      if (alive[i])
        read(vec[b][i], kDim * 4);
    read(cache[b], kCacheRows * kDim * 4);
  }
  for (size_t b = 1; b < all.size(); ++b)
    if (bytes[b] != bytes[(b + 1) % all.size()] || bytes[b] != bytes[0]) {
      if (bytes[b] == bytes[(b + 1) % all.size()])
        b = 0; // the first backend is the odd one out
      else if (bytes[0] == bytes[b])
        b = (b + 1) % all.size();
      size_t at = 0;
      size_t other = (b + 1) % all.size();
      while (bytes[b][at] == bytes[other][at])
        ++at;
      return all[b]->name() + " differs from the other two at byte " + std::to_string(at) +
             " of the buffers read back (vectors of " + std::to_string(kDim * 4) +
             " bytes, then the cache)";
    }
  return "";
}

int graphCount() {
  int n = 500;
  if (const char *s = std::getenv("SINTER_FUZZ_GRAPHS"))
    (void)absl::SimpleAtoi(s, &n);
  return n;
}

TEST(FusionFuzzTest, FusedUnfusedAndReferenceAgreeByteForByte) {
  int n = graphCount();
  int failures = 0;
  int first = 1;
  if (const char *s = std::getenv("SINTER_FUZZ_SEED"); s && absl::SimpleAtoi(s, &first))
    n = first; // reproduce one graph: SINTER_FUZZ_SEED=N (with SINTER_DUMP=dir to see it)
  for (int seed = first; seed <= n && failures < 5; ++seed) {
    std::string problem = runGraph(uint32_t(seed));
    if (!problem.empty()) {
      ++failures;
      ADD_FAILURE() << "graph seed " << seed << ": " << problem;
    }
  }
  RecordProperty("graphs", n);
}

} // namespace
} // namespace sinter
