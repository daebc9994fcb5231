// CpuDecodeBench.cpp - the `cpu` backend decoding tinyllama-1.1b (synthetic, Q4_0) at position
// 256, fused against the same build's eager per-op path and its lazy unfused path, next to the
// machine's streaming-read bandwidth; and the cold compile of whole decode plans.
//
// Effective bandwidth = (weight bytes + KV bytes read per token) / time per token: every matrix,
// norm and the classifier once, one embedding row, and the K and V caches of every layer up to
// the position (positions 0..255 are not decoded first; what they hold does not change the work).
// A timed step is Decoder::step at position 256, after warm-up steps at 254..256 have compiled
// the plans (position a plan parameter, as in a real decode); plan_misses counts compilations
// inside the timed loop (0 means every timed token ran cached plans). read_fraction is the
// effective bandwidth over BM_ReadBandwidth's 2-thread figure, measured in the same process.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "backends/CpuBackend.h"
#include "backends/EagerBackend.h"
#include "bench/ReadBandwidth.h"
#include "bench/WarmDecoder.h"
#include "runtime/LazyBackend.h"
#include "sinter/Factory.h"
#include "support/ThreadPool.h"
#include "tools/model/Decoder.h"
#include "tools/model/Llama2cLoader.h"
#include "tools/model/Synthetic.h"

namespace sinter {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kPosition = 256;

const model::ModelWeights &tinyllama() {
  static const model::ModelWeights *weights = [] {
    model::SyntheticOptions so;
    so.dtype = DType::Q4_0;
    auto w = model::generatePreset("tinyllama-1.1b", so);
    if (!w.ok()) {
      std::fprintf(stderr, "bench: %s\n", std::string(w.status().message()).c_str());
      std::abort();
    }
    return new model::ModelWeights(std::move(*w));
  }();
  return *weights;
}

// Streaming read of 256 MiB of 64-bit words on `threads` threads; bytes per second.
double readOnce(unsigned threads) {
  ThreadPool pool(threads);
  auto start = Clock::now();
  uint64_t total = bench::streamRead(pool);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  benchmark::DoNotOptimize(total);
  return double(bench::kStreamReadBytes) / seconds;
}

// The best of several 2-thread passes, measured once per process.
double readBandwidth() {
  static const double best = [] {
    double b = 0;
    for (int i = 0; i < 10; ++i)
      b = std::max(b, readOnce(2));
    return b;
  }();
  return best;
}

void BM_ReadBandwidth(benchmark::State &state) {
  unsigned threads = static_cast<unsigned>(state.range(0));
  double bytes = 0;
  for (auto _ : state) {
    auto start = Clock::now();
    bytes = readOnce(threads);
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * (int64_t(256) << 20));
  state.counters["GB_per_s"] = bytes / 1e9;
  if (threads == 2)
    state.counters["best_GB_per_s"] = readBandwidth() / 1e9;
}
BENCHMARK(BM_ReadBandwidth)
    ->Arg(2)
    ->ArgName("threads")
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(20);

enum class Mode { Fused, Eager, Unfused };

BackendOptions optionsFor(Mode mode) {
  BackendOptions o;
  o.kind = "cpu";
  o.fusion = mode == Mode::Fused;
  o.eager = mode == Mode::Eager;
  return o;
}

runtime::LazyStats statsOf(ComputeBackend &backend) {
  if (auto *lazy = dynamic_cast<runtime::LazyBackend *>(&backend))
    return lazy->stats();
  if (auto *eager = dynamic_cast<EagerBackend *>(&backend))
    return eager->stats();
  return {};
}

void BM_TinyllamaDecode(benchmark::State &state, Mode mode) {
  const model::ModelWeights &weights = tinyllama();
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = createBackend(optionsFor(mode));
  if (!backend.ok()) {
    state.SkipWithError(std::string(backend.status().message()).c_str());
    return;
  }
  std::vector<float> logits;
  auto decoder = bench::warmDecoder(**backend, weights, kPosition, logits);
  if (!decoder.ok()) {
    state.SkipWithError(std::string(decoder.status().message()).c_str());
    return;
  }
  runtime::LazyStats before = statsOf(**backend);
  auto start = Clock::now();
  for (auto _ : state) {
    absl::Status s = (*decoder)->step(1, kPosition, absl::MakeSpan(logits));
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  runtime::LazyStats after = statsOf(**backend);
  const double bytes = double(model::decodeBytesPerToken(weights, kPosition));
  const double tokens = double(state.iterations());
  state.counters["tokens_per_s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["GB_per_s"] =
      benchmark::Counter(tokens * bytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["read_fraction"] = tokens * bytes / seconds / readBandwidth();
  state.counters["MB_per_token"] = bytes / 1e6;
  state.counters["kernels_per_token"] =
      double(after.kernelsLaunched - before.kernelsLaunched) / tokens;
  state.counters["plan_misses"] = double(after.cache.misses - before.cache.misses);
}
BENCHMARK_CAPTURE(BM_TinyllamaDecode, fused, Mode::Fused)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(4);
BENCHMARK_CAPTURE(BM_TinyllamaDecode, eager, Mode::Eager)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(4);
BENCHMARK_CAPTURE(BM_TinyllamaDecode, lazy_unfused, Mode::Unfused)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(4);

// Fused, lazy-unfused and eager decoding side by side: one backend of each mode (and a fused one
// whose rms_norm is folded into the row loops' kernels, CpuCompilerOptions::fusePrologue), and each
// round of the timed loop decodes one token on every mode in turn (in a rotating order), so all
// see the same load on a shared machine. Per mode: the median and best time per token over the
// rounds; the ratios are of medians.
void BM_TinyllamaDecodeSideBySide(benchmark::State &state) {
  const model::ModelWeights &weights = tinyllama();
  // The fourth: fused with the rms_norm folded into every call of the row loop's kernels
  // (CpuCompilerOptions::fusePrologue) instead of run once before the loop.
  constexpr int kModes = 4;
  const Mode modes[kModes] = {Mode::Fused, Mode::Unfused, Mode::Eager, Mode::Fused};
  const char *names[kModes] = {"fused", "unfused", "eager", "fused_norm_prologue"};
  std::vector<std::unique_ptr<ComputeBackend>> backends(kModes);
  std::vector<std::unique_ptr<model::Decoder>> decoders(kModes);
  std::vector<float> logits(weights.config.vocabSize);
  // The creation order rotates per run too (--benchmark_repetitions=4 gives each mode each
  // place once): the backend created last measured up to 10% faster, whichever mode it was.
  static int runs = 0;
  const int firstCreated = runs++ % kModes;
  for (int c = 0; c < kModes; ++c) {
    const int m = (firstCreated + c) % kModes;
    codegen::CpuCompilerOptions compilerOptions;
    compilerOptions.fusePrologue = m == 3;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
        createCpuBackend(optionsFor(modes[m]), compilerOptions);
    if (!backend.ok()) {
      state.SkipWithError(std::string(backend.status().message()).c_str());
      return;
    }
    auto decoder = bench::warmDecoder(**backend, weights, kPosition, logits);
    if (!decoder.ok()) {
      state.SkipWithError(std::string(decoder.status().message()).c_str());
      return;
    }
    backends[m] = std::move(*backend);
    decoders[m] = std::move(*decoder);
  }
  std::vector<double> seconds[kModes];
  int round = 0;
  for (auto _ : state) {
    // The order rotates: whichever mode runs first in a round measured ~10% slower.
    for (int k = 0; k < kModes; ++k) {
      const int m = (round + k) % kModes;
      auto start = Clock::now();
      absl::Status s = decoders[m]->step(1, kPosition, absl::MakeSpan(logits));
      seconds[m].push_back(std::chrono::duration<double>(Clock::now() - start).count());
      if (!s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
        return;
      }
    }
    ++round;
  }
  const double bytes = double(model::decodeBytesPerToken(weights, kPosition));
  double median[kModes];
  for (int m = 0; m < kModes; ++m) {
    std::vector<double> &t = seconds[m];
    std::sort(t.begin(), t.end());
    median[m] = t[t.size() / 2];
    state.counters[std::string(names[m]) + "_tok_s"] = 1.0 / median[m];
    state.counters[std::string(names[m]) + "_best_tok_s"] = 1.0 / t.front();
    state.counters[std::string(names[m]) + "_read_frac"] = bytes / median[m] / readBandwidth();
  }
  state.counters["fused_vs_eager"] = median[2] / median[0];
  state.counters["fused_vs_unfused"] = median[1] / median[0];
}
BENCHMARK(BM_TinyllamaDecodeSideBySide)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(48);

// Cold compile: a fresh cpu backend (fused; its own JIT and kernel cache, SINTER_CACHE_DIR
// unset) and the plan compile of the first decode step: fusion pipeline, kernel generation, O3
// and machine code. The weight upload is not timed.
void coldCompile(benchmark::State &state, const model::ModelWeights &weights) {
  unsetenv("SINTER_CACHE_DIR");
  double kernels = 0, jitSeconds = 0;
  for (auto _ : state) {
    auto created = codegen::CpuCompiler::create();
    if (!created.ok()) {
      state.SkipWithError(std::string(created.status().message()).c_str());
      return;
    }
    std::shared_ptr<codegen::CpuCompiler> compiler(std::move(*created));
    std::unique_ptr<ComputeBackend> backend = *createCpuBackend(optionsFor(Mode::Fused), compiler);
    model::DecoderOptions dopts;
    dopts.maxContext = 64;
    auto decoder = model::Decoder::create(*backend, weights, dopts);
    if (!decoder.ok()) {
      state.SkipWithError(std::string(decoder.status().message()).c_str());
      return;
    }
    std::vector<float> logits(weights.config.vocabSize);
    if (absl::Status s = (*decoder)->step(1, 0, absl::MakeSpan(logits)); !s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    runtime::LazyStats stats = statsOf(*backend);
    state.SetIterationTime(stats.cache.compileSeconds);
    kernels = double(compiler->stats().kernelsCompiled);
    jitSeconds = compiler->stats().compileSeconds;
  }
  state.counters["kernels_compiled"] = kernels;
  state.counters["jit_ms"] = jitSeconds * 1e3;
}

void BM_ColdCompile_tinyllama(benchmark::State &state) { coldCompile(state, tinyllama()); }
BENCHMARK(BM_ColdCompile_tinyllama)->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(3);

void BM_ColdCompile_stories260K(benchmark::State &state) {
  const char *env = std::getenv("SINTER_SHARED_DIR");
  const std::string path = std::string(env ? env : SINTER_SHARED_DIR) + "/models/stories260K.bin";
  static absl::StatusOr<model::ModelWeights> weights = model::loadLlama2c(path);
  if (!weights.ok()) {
    state.SkipWithError(
        ("stories260K not available (needs ../shared): " + std::string(weights.status().message()))
            .c_str());
    return;
  }
  coldCompile(state, *weights);
}
BENCHMARK(BM_ColdCompile_stories260K)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime()
    ->Iterations(5);

} // namespace
} // namespace sinter

BENCHMARK_MAIN();
