// ReadBandwidth.h - the streaming read the benchmarks compare kernels with.
#ifndef SINTER_BENCH_READBANDWIDTH_H
#define SINTER_BENCH_READBANDWIDTH_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include "support/ThreadPool.h"

namespace sinter::bench {

/// Bytes one streamRead pass reads: a 256 MiB array of 64-bit words.
inline constexpr size_t kStreamReadBytes = size_t(256) << 20;

/// Sums the 256 MiB array (allocated once per process) on `pool`, split into 1024 chunks with
/// four independent accumulators each; returns the sum so the caller can keep it alive.
inline uint64_t streamRead(ThreadPool &pool) {
  constexpr size_t kWords = kStreamReadBytes / 8, kChunks = 1024;
  static std::vector<uint64_t> data(kWords, 1);
  std::vector<uint64_t> partial(kChunks, 0);
  pool.parallelFor(
      kChunks,
      [&](uint64_t b, uint64_t e) {
        for (uint64_t c = b; c < e; ++c) {
          const uint64_t *p = data.data() + c * (kWords / kChunks);
          uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (size_t i = 0; i < kWords / kChunks; i += 4) {
            s0 += p[i];
            s1 += p[i + 1];
            s2 += p[i + 2];
            s3 += p[i + 3];
          }
          partial[c] = s0 + s1 + s2 + s3;
        }
      },
      1);
  uint64_t total = 0;
  for (uint64_t v : partial)
    total += v;
  return total;
}

} // namespace sinter::bench

#endif // SINTER_BENCH_READBANDWIDTH_H
