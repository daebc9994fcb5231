// CpuKernelBench.cpp - the JIT-compiled CPU matrix-vector kernels against the reference kernel
// and against the machine's streaming-read bandwidth.
//
// A decode step is almost all quantized_matmul weight reads, so the figure that matters is the
// weight bytes per second of the kernel next to what a plain summing loop can read: the first
// should approach the second. bytes_per_second counts weight bytes only.
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/ReadBandwidth.h"
#include "codegen/llvm/CpuJit.h"
#include "support/Ops.h"
#include "support/Quant.h"
#include "support/ThreadPool.h"

namespace sinter {
namespace {

struct MatVec {
  std::vector<uint8_t> weights, x, out;
  OpCall op;
  uint64_t weightBytes = 0;
};

MatVec makeMatVec(DType dtype, uint32_t rows, uint32_t cols) {
  MatVec m;
  m.op = ops::quantizedMatmul(BufferHandle{1}, BufferHandle{2}, BufferHandle{3}, rows, cols, dtype);
  m.weightBytes = rows * rowBytes(dtypeInfo(dtype), cols);
  m.weights.resize(m.weightBytes);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(cols);
  for (uint32_t r = 0; r < rows; ++r) {
    for (float &v : row)
      v = dist(rng);
    (void)quantizeRow(dtype, row.data(), m.weights.data() + r * (m.weightBytes / rows), cols);
  }
  std::vector<float> x(cols);
  for (float &v : x)
    v = dist(rng);
  m.x.resize(cols * 4);
  std::memcpy(m.x.data(), x.data(), m.x.size());
  m.out.resize(rows * 4);
  return m;
}

codegen::CpuJit &jit() {
  static codegen::CpuJit *j = [] {
    auto created = codegen::CpuJit::create();
    if (!created.ok()) {
      std::fprintf(stderr, "bench: %s\n", std::string(created.status().message()).c_str());
      std::abort();
    }
    return created->release();
  }();
  return *j;
}

// threads == 0: the reference kernel; otherwise the JIT kernel on that many threads.
void BM_QMatVec(benchmark::State &state, DType dtype, uint32_t rows, uint32_t cols) {
  unsigned threads = static_cast<unsigned>(state.range(0));
  MatVec m = makeMatVec(dtype, rows, cols);
  uint8_t *buffers[3] = {m.weights.data(), m.x.data(), m.out.data()};
  if (threads == 0) {
    for (auto _ : state) {
      executeReference(m.op, [&](BufferHandle h) { return buffers[h.id - 1]; });
      benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(m.weightBytes));
    state.SetLabel("reference");
    return;
  }
  auto fns = jit().compile({codegen::singleOpSpec(m.op, 0)});
  if (!fns.ok()) {
    state.SkipWithError(std::string(fns.status().message()).c_str());
    return;
  }
  codegen::KernelFn fn = fns->entries[0]; // fns->code keeps it alive
  int64_t ints[5] = {rows, cols, 0, 0, 0};
  ThreadPool pool(threads);
  for (auto _ : state) {
    pool.parallelFor(
        rows, [&](uint64_t b, uint64_t e) { fn(buffers, ints, int64_t(b), int64_t(e)); }, 16);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(m.weightBytes));
  state.SetLabel("jit");
}

void jitArgs(benchmark::internal::Benchmark *b) {
  b->Arg(0)->Arg(1);
  if (ThreadPool::defaultSize() > 1)
    b->Arg(int64_t(ThreadPool::defaultSize()));
  b->ArgName("threads")->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_QMatVec, q4_0_2048x2048, DType::Q4_0, 2048, 2048)->Apply(jitArgs);
BENCHMARK_CAPTURE(BM_QMatVec, q4_0_5632x2048, DType::Q4_0, 5632, 2048)->Apply(jitArgs);
BENCHMARK_CAPTURE(BM_QMatVec, q8_0_2048x2048, DType::Q8_0, 2048, 2048)->Apply(jitArgs);
BENCHMARK_CAPTURE(BM_QMatVec, q8_0_5632x2048, DType::Q8_0, 5632, 2048)->Apply(jitArgs);
BENCHMARK_CAPTURE(BM_QMatVec, q4_k_5632x2048, DType::Q4_K, 5632, 2048)->Apply(jitArgs);
BENCHMARK_CAPTURE(BM_QMatVec, q6_k_5632x2048, DType::Q6_K, 5632, 2048)->Apply(jitArgs);
BENCHMARK_CAPTURE(BM_QMatVec, f16_2048x2048, DType::F16, 2048, 2048)->Apply(jitArgs);
BENCHMARK_CAPTURE(BM_QMatVec, f32_2048x2048, DType::F32, 2048, 2048)->Apply(jitArgs);

// Streaming read: the sum of a 256 MiB array of 64-bit words, split across `threads` threads.
void BM_ReadBandwidth(benchmark::State &state) {
  ThreadPool pool(static_cast<unsigned>(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(bench::streamRead(pool));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bench::kStreamReadBytes));
}
BENCHMARK(BM_ReadBandwidth)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

} // namespace
} // namespace sinter

BENCHMARK_MAIN();
