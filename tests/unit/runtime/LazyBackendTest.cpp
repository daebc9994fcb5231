// LazyBackendTest.cpp - tests runtime/LazyBackend.cpp: recording, flush points, deferred free,
// deferred failures, rejected calls, threads, and plan reuse across a decode-like loop.
#include "runtime/LazyBackend.h"

#include <cstring>
#include <random>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backends/ReferenceBackend.h"
#include "runtime/PlanInterpreter.h"

namespace sinter::runtime {
namespace {

using ::testing::HasSubstr;

std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

BufferHandle upload(ComputeBackend &b, const std::vector<float> &v) {
  BufferHandle h = *b.allocate(v.size() * 4);
  EXPECT_TRUE(b.copyToDevice({reinterpret_cast<const uint8_t *>(v.data()), v.size() * 4}, h).ok());
  return h;
}

std::vector<float> download(ComputeBackend &b, BufferHandle h, size_t n) {
  std::vector<float> v(n);
  absl::Status s = b.copyFromDevice(h, {reinterpret_cast<uint8_t *>(v.data()), n * 4});
  EXPECT_TRUE(s.ok()) << s;
  return v;
}

// A small layer-like sequence: norm, matmul, rope, silu, mul, add, cache write, attention.
std::vector<float> runSequence(ComputeBackend &b, uint32_t pos) {
  const uint32_t dim = 16, headDim = 4, heads = 4;
  BufferHandle x = upload(b, randomFloats(dim, 1));
  BufferHandle g = upload(b, randomFloats(dim, 2));
  BufferHandle w = upload(b, randomFloats(dim * dim, 3));
  BufferHandle cache = *b.allocate(8 * dim * 4);
  BufferHandle n = *b.allocate(dim * 4), q = *b.allocate(dim * 4), k = *b.allocate(dim * 4);
  BufferHandle s = *b.allocate(8 * 4), o = *b.allocate(dim * 4);
  EXPECT_TRUE(b.rmsNorm(x, g, n, dim, 1e-5f).ok());
  EXPECT_TRUE(b.matmul(n, w, q, 1, dim, dim).ok());
  EXPECT_TRUE(b.matmul(q, w, k, 1, dim, dim).ok());
  EXPECT_TRUE(b.rope(q, k, pos, headDim, 10000.0f, heads, heads).ok());
  for (uint32_t t = 0; t <= pos; ++t)
    EXPECT_TRUE(b.copyBufferOffset(k, cache, 0, t * dim * 4, dim * 4).ok());
  for (uint32_t h = 0; h < heads; ++h) {
    EXPECT_TRUE(b.attnScore(q, cache, s, headDim, pos + 1, h * headDim, h * headDim, dim).ok());
    EXPECT_TRUE(b.softmax(s, s, pos + 1).ok());
    EXPECT_TRUE(b.attnValue(s, cache, o, headDim, pos + 1, h * headDim, dim, h * headDim).ok());
  }
  EXPECT_TRUE(b.silu(o, n, dim).ok());
  EXPECT_TRUE(b.elementMul(n, q, n, dim).ok());
  EXPECT_TRUE(b.add(n, x, x, dim).ok());
  return download(b, x, dim);
}

TEST(LazyBackendTest, MatchesTheReferenceBitForBitOnThePlanInterpreter) {
  for (uint32_t pos : {0u, 3u}) {
    ReferenceBackend ref;
    LazyBackend lazy;
    EXPECT_EQ(runSequence(ref, pos), runSequence(lazy, pos)) << "pos " << pos;
  }
}

TEST(LazyBackendTest, NothingRunsBeforeAFlushPoint) {
  LazyBackend lazy;
  BufferHandle a = upload(lazy, {1, 2, 3, 4});
  BufferHandle out = *lazy.allocate(16);
  ASSERT_TRUE(lazy.add(a, a, out, 4).ok());
  EXPECT_EQ(lazy.pendingEntries(), 1u);
  EXPECT_EQ(lazy.stats().flushes, 0u);
  EXPECT_EQ(download(lazy, out, 4), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(lazy.pendingEntries(), 0u);
  EXPECT_EQ(lazy.stats().flushes, 1u);
}

// LazyStats::submissions: unset on the host; where the options give the device's counter, its
// value as of the stats() call.
TEST(LazyBackendTest, SubmissionsComeFromTheDeviceCounter) {
  LazyBackend host;
  EXPECT_FALSE(host.stats().submissions.has_value());
  uint64_t submitted = 0;
  LazyBackendOptions options;
  options.deviceSubmissions = [&submitted] { return submitted; };
  LazyBackend device(std::move(options));
  EXPECT_EQ(device.stats().submissions, std::optional<uint64_t>(0));
  submitted = 3;
  EXPECT_EQ(device.stats().submissions, std::optional<uint64_t>(3));
}

TEST(LazyBackendTest, CopyToDeviceCapturesTheHostBytesAtCallTime) {
  LazyBackend lazy;
  BufferHandle a = upload(lazy, {1, 1});
  BufferHandle out = *lazy.allocate(8);
  ASSERT_TRUE(lazy.add(a, a, out, 2).ok()); // a is now used by pending work
  std::vector<float> host = {5, 6};
  ASSERT_TRUE(lazy.copyToDevice({reinterpret_cast<uint8_t *>(host.data()), 8}, a).ok());
  host = {100, 100}; // reused by the caller at once
  ASSERT_TRUE(lazy.add(a, a, a, 2).ok());
  EXPECT_EQ(download(lazy, out, 2), (std::vector<float>{2, 2}));
  EXPECT_EQ(download(lazy, a, 2), (std::vector<float>{10, 12}));
}

TEST(LazyBackendTest, FreeIsDeferredUntilPendingWorkRan) {
  LazyBackend lazy;
  BufferHandle a = upload(lazy, {1, 2});
  BufferHandle out = *lazy.allocate(8);
  ASSERT_TRUE(lazy.add(a, a, out, 2).ok());
  ASSERT_TRUE(lazy.free(a).ok());
  EXPECT_EQ(lazy.stats().deferredFrees, 1u);
  // The handle is gone for the caller at once...
  absl::Status reuse = lazy.add(a, a, out, 2);
  EXPECT_EQ(reuse.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(reuse.message()), HasSubstr("add: a buffer"));
  EXPECT_EQ(lazy.free(a).code(), absl::StatusCode::kNotFound);
  // ...but the recorded read still sees its bytes.
  EXPECT_EQ(download(lazy, out, 2), (std::vector<float>{2, 4}));
  EXPECT_EQ(lazy.free(a).code(), absl::StatusCode::kNotFound);
}

// The recorder caches handle lookups by id modulo a table size: two live handles sharing an
// entry, used in turn, must each be checked against their own size, and a freed one must not be
// found through the cache.
TEST(LazyBackendTest, HandlesSharingALookupEntryKeepTheirOwnSizes) {
  LazyBackend lazy;
  BufferHandle small = *lazy.allocate(16);
  BufferHandle out = *lazy.allocate(4096);
  std::vector<BufferHandle> more;
  BufferHandle big{};
  for (int i = 0; i < 4096 && big.id == 0; ++i) {
    BufferHandle h = *lazy.allocate(4096);
    more.push_back(h);
    if (h.id != small.id && (h.id - small.id) % 1024 == 0)
      big = h;
  }
  ASSERT_NE(big.id, 0u) << "no handle id shared small's entry";
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(lazy.add(big, big, out, 1024).ok());
    absl::Status s = lazy.add(small, small, out, 1024);
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("add: a buffer ", small.id, " holds 16 bytes")));
    ASSERT_TRUE(lazy.add(small, small, out, 4).ok());
  }
  ASSERT_TRUE(lazy.synchronize().ok());
  ASSERT_TRUE(lazy.add(big, big, out, 1024).ok()); // cached again, then freed
  ASSERT_TRUE(lazy.free(big).ok());
  EXPECT_EQ(lazy.add(big, big, out, 1024).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(lazy.add(small, small, out, 4).ok());
  EXPECT_TRUE(lazy.synchronize().ok());
}

TEST(LazyBackendTest, RejectedCallRecordsNothingWithTheReferenceMessage) {
  LazyBackend lazy;
  ReferenceBackend ref;
  for (ComputeBackend *b :
       {static_cast<ComputeBackend *>(&lazy), static_cast<ComputeBackend *>(&ref)}) {
    BufferHandle x = *b->allocate(64), w = *b->allocate(32), out = *b->allocate(64);
    absl::Status s = b->rmsNorm(x, w, out, 16, 1e-5f);
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("rms_norm: weight buffer ", w.id,
                                                                 " holds 32 bytes, needs 64")));
  }
  EXPECT_EQ(lazy.pendingEntries(), 0u);
  EXPECT_EQ(lazy.stats().callsRecorded, 0u);
}

TEST(LazyBackendTest, DeferredFailureIsReportedAtTheNextFlushNamingTheOp) {
  auto compiler = std::make_unique<InterpreterCompiler>([](const OpCall &op) {
    return op.kind == OpKind::Silu ? absl::InternalError("injected device fault")
                                   : absl::OkStatus();
  });
  LazyBackendOptions options;
  options.compiler = std::move(compiler);
  LazyBackend lazy(std::move(options));
  BufferHandle a = upload(lazy, {1, 2});
  BufferHandle untouched = upload(lazy, {7, 8});
  BufferHandle out = *lazy.allocate(8);
  ASSERT_TRUE(lazy.add(a, a, out, 2).ok());
  ASSERT_TRUE(lazy.silu(out, out, 2).ok()); // accepted: the failure comes later
  absl::Status s = lazy.synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("silu(in=buffer ", out.id, ", out=buffer ", out.id)));
  EXPECT_THAT(std::string(s.message()), HasSubstr("injected device fault"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("flush at synchronize"));
  // Reported once; the backend keeps working and untouched buffers are intact.
  EXPECT_TRUE(lazy.synchronize().ok());
  EXPECT_EQ(download(lazy, untouched, 2), (std::vector<float>{7, 8}));
  EXPECT_EQ(download(lazy, out, 2), (std::vector<float>{2, 4})); // add ran, silu did not
  ASSERT_TRUE(lazy.add(untouched, untouched, out, 2).ok());
  EXPECT_EQ(download(lazy, out, 2), (std::vector<float>{14, 16}));
}

TEST(LazyBackendTest, TraceSizeLimitFlushes) {
  LazyBackendOptions options;
  options.maxTraceEntries = 4;
  LazyBackend lazy(std::move(options));
  BufferHandle a = upload(lazy, {1});
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(lazy.add(a, a, a, 1).ok());
  EXPECT_EQ(lazy.stats().sizeLimitFlushes, 2u);
  EXPECT_EQ(download(lazy, a, 1), (std::vector<float>{1024}));
}

TEST(LazyBackendTest, DecodeLoopCompilesTwiceThenHits) {
  LazyBackend lazy;
  const uint32_t dim = 8;
  BufferHandle q = upload(lazy, randomFloats(dim, 4)), k = upload(lazy, randomFloats(dim, 5));
  BufferHandle cache = *lazy.allocate(64 * dim * 4), s = *lazy.allocate(64 * 4);
  BufferHandle o = *lazy.allocate(dim * 4);
  for (uint32_t pos = 0; pos < 64; ++pos) {
    ASSERT_TRUE(lazy.rope(q, k, pos, 4, 10000.0f, 2, 2).ok());
    ASSERT_TRUE(lazy.copyBufferOffset(k, cache, 0, pos * dim * 4, dim * 4).ok());
    ASSERT_TRUE(lazy.attnScore(q, cache, s, 4, pos + 1, 0, 0, dim).ok());
    ASSERT_TRUE(lazy.softmax(s, s, pos + 1).ok());
    ASSERT_TRUE(lazy.attnValue(s, cache, o, 4, pos + 1, 0, dim, 0).ok());
    ASSERT_TRUE(lazy.synchronize().ok());
  }
  LazyStats stats = lazy.stats();
  EXPECT_EQ(stats.flushes, 64u);
  EXPECT_EQ(stats.cache.misses, 2u);
  EXPECT_EQ(stats.cache.hits, 62u);
  EXPECT_EQ(stats.cache.rediscoveries, 1u);
  // Host time is accounted to the flushes' lookup and run, and to the recording between them.
  EXPECT_GT(stats.lookupSeconds, 0.0);
  EXPECT_GT(stats.runSeconds, 0.0);
  EXPECT_GT(stats.betweenFlushSeconds, 0.0);
  EXPECT_EQ(stats.readSeconds, 0.0) << "nothing was read";
  std::vector<float> out(dim);
  ASSERT_TRUE(lazy.copyFromDevice(o, absl::Span<uint8_t>(reinterpret_cast<uint8_t *>(out.data()),
                                                         out.size() * 4))
                  .ok());
  EXPECT_GT(lazy.stats().readSeconds, 0.0);
}

// overlapCalls: an add that leaves that many calls pending flushes them (Trace::segment counts
// the pieces since the last complete flush). Pieces of one token that look alike keep a plan
// each (segment is in the key), the next token hits all of them, results are the reference's,
// and a freed buffer the pieces read is released at the complete flush, not before.
TEST(LazyBackendTest, OverlapFlushesAtAddsAndKeysThePiecesApart) {
  LazyBackendOptions options;
  options.overlapCalls = 2;
  options.overlapGrowth = 1;
  std::vector<uint32_t> segments;
  options.onFlush = [&](const Trace &t, absl::Span<const BufferHandle>) {
    segments.push_back(t.segment);
  };
  LazyBackend lazy(std::move(options));
  BufferHandle a = upload(lazy, {1, 2}), b = upload(lazy, {3, 4});
  BufferHandle x = *lazy.allocate(8);
  for (int token = 0; token < 2; ++token) {
    segments.clear();
    const float zero[2] = {0, 0};
    ASSERT_TRUE(lazy.copyToDevice({reinterpret_cast<const uint8_t *>(zero), 8}, x).ok());
    BufferHandle d = upload(lazy, {1, 1});
    for (int layer = 0; layer < 3; ++layer) { // three alike pieces: mul then add
      ASSERT_TRUE(lazy.elementMul(a, d, a, 2).ok());
      ASSERT_TRUE(lazy.add(x, a, x, 2).ok()); // 2 pending: flushed
      EXPECT_EQ(lazy.pendingEntries(), 0u);
    }
    ASSERT_TRUE(lazy.free(d).ok());         // not in the pending (empty) trace: released now
    ASSERT_TRUE(lazy.add(x, b, x, 2).ok()); // 1 pending: no flush
    EXPECT_EQ(lazy.pendingEntries(), 1u);
    EXPECT_EQ(download(lazy, x, 2), (std::vector<float>{6, 10}));
    EXPECT_EQ(segments, (std::vector<uint32_t>{0, 1, 2, 3})) << "token " << token;
  }
  LazyStats stats = lazy.stats();
  EXPECT_EQ(stats.overlapFlushes, 6u);
  EXPECT_EQ(stats.cache.newStructures, 4u) << "three alike pieces and the last: a plan each";
  EXPECT_EQ(stats.cache.hits, 4u) << "the second token hits every piece";
  // The same trace with overlap off is one flush of its own structure.
  LazyBackend plain;
  BufferHandle p = upload(plain, {1, 2});
  BufferHandle q = *plain.allocate(8);
  for (int layer = 0; layer < 3; ++layer)
    ASSERT_TRUE(plain.add(q, p, q, 2).ok());
  EXPECT_EQ(plain.pendingEntries(), 3u);
  EXPECT_EQ(download(plain, q, 2), (std::vector<float>{3, 6}));
  EXPECT_EQ(plain.stats().overlapFlushes, 0u);
}

// overlapGrowth: each piece waits for `growth` times the calls of the one before (2, 4, 8 with
// overlapCalls 2 and growth 2), and a complete flush starts over.
TEST(LazyBackendTest, OverlapPiecesGrowByTheGrowthFactor) {
  LazyBackendOptions options;
  options.overlapCalls = 2;
  options.overlapGrowth = 2;
  std::vector<size_t> sizes;
  options.onFlush = [&](const Trace &t, absl::Span<const BufferHandle>) {
    sizes.push_back(t.entries.size());
  };
  LazyBackend lazy(std::move(options));
  BufferHandle a = upload(lazy, {1});
  for (int token = 0; token < 2; ++token) {
    sizes.clear();
    for (int i = 0; i < 15; ++i)
      ASSERT_TRUE(lazy.add(a, a, a, 1).ok());
    ASSERT_TRUE(lazy.synchronize().ok());
    EXPECT_EQ(sizes, (std::vector<size_t>{2, 4, 8, 1})) << "token " << token;
  }
  EXPECT_EQ(download(lazy, a, 1), (std::vector<float>{1u << 30}));
  EXPECT_EQ(lazy.stats().overlapFlushes, 6u);
}

TEST(LazyBackendTest, SameStructureOnOtherBuffersIsAHit) {
  LazyBackend lazy;
  for (int i = 0; i < 3; ++i) {
    BufferHandle a = upload(lazy, {1, 2, 3});
    BufferHandle out = *lazy.allocate(12);
    ASSERT_TRUE(lazy.add(a, a, out, 3).ok());
    EXPECT_EQ(download(lazy, out, 3), (std::vector<float>{2, 4, 6}));
  }
  EXPECT_EQ(lazy.stats().cache.misses, 1u);
  EXPECT_EQ(lazy.stats().cache.hits, 2u);
}

TEST(LazyBackendTest, ConcurrentCallersLoseNothing) {
  LazyBackend lazy;
  constexpr int kThreads = 4, kIters = 200;
  std::vector<std::thread> threads;
  std::vector<float> results(kThreads);
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      BufferHandle acc = *lazy.allocate(4);
      BufferHandle one = upload(lazy, {1.0f});
      for (int i = 0; i < kIters; ++i) {
        ASSERT_TRUE(lazy.add(acc, one, acc, 1).ok());
        if (i % 17 == 0)
          ASSERT_TRUE(lazy.synchronize().ok());
      }
      results[t] = download(lazy, acc, 1)[0];
      ASSERT_TRUE(lazy.free(acc).ok());
      ASSERT_TRUE(lazy.free(one).ok());
    });
  for (auto &th : threads)
    th.join();
  for (float r : results)
    EXPECT_EQ(r, float(kIters));
  EXPECT_EQ(lazy.stats().callsRecorded, uint64_t(kThreads * kIters));
}

} // namespace
} // namespace sinter::runtime
