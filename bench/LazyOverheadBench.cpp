// LazyOverheadBench.cpp - host cost of the lazy backend's warm path.
//
// Issue 4's numbers: the median host cost per recorded call, and the cost of a decode step's
// flush on a plan-cache hit, for tinyllama-1.1b dimensions. Plans here do not execute (a null
// compiler), so what is timed is exactly the runtime's own work: validation, recording, the
// structural comparison of a hit, and parameter extraction. The decode step's calls come from
// the real driver (tools/model) recording one token.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include <benchmark/benchmark.h>

#include "runtime/LazyBackend.h"
#include "tools/model/Decoder.h"
#include "tools/model/Synthetic.h"

namespace sinter {
namespace {

using runtime::LazyBackend;
using runtime::LazyBackendOptions;

class NullPlan : public Plan {
public:
  explicit NullPlan(size_t n) : n_(n) {}
  absl::Status run(const PlanArgs &) override { return absl::OkStatus(); }
  size_t numKernels() const override { return n_; }
  std::string describe() const override { return "null"; }

private:
  size_t n_;
};

class NullCompiler : public PlanCompiler {
public:
  std::string name() const override { return "null"; }
  absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                const std::vector<IntSlot> &) override {
    return std::unique_ptr<Plan>(new NullPlan(trace.entries.size()));
  }
};

LazyBackendOptions nullOptions() {
  LazyBackendOptions o;
  o.compiler = std::make_unique<NullCompiler>();
  o.name = "lazy-null";
  return o;
}

// One recorded call (add on a small buffer); a flush every 512 calls keeps the trace bounded.
void BM_RecordCall(benchmark::State &state) {
  LazyBackend lazy(nullOptions());
  BufferHandle a = *lazy.allocate(64 * 4), b = *lazy.allocate(64 * 4);
  int n = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(lazy.add(a, b, b, 64));
    if (++n == 512) {
      state.PauseTiming();
      (void)lazy.synchronize();
      n = 0;
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordCall);

// The calls of two consecutive decode steps (positions 0 and 1; Q4_0 weights, all zero: only
// the calls matter), captured from the driver. Replaying them in turn makes the plan cache find
// the per-token integers as parameters, as a real decode does.
struct DecodeStepCalls {
  Trace trace[2];
};

// Records two steps of the driver and returns their calls (the flushes after the weight upload).
DecodeStepCalls captureSteps(const std::string &preset) {
  DecodeStepCalls calls;
  int captured = 0;
  LazyBackendOptions o = nullOptions();
  o.onFlush = [&](const Trace &t, absl::Span<const BufferHandle>) {
    if (captured == 2 || t.entries.size() < 16)
      return; // skip flushes of the weight upload
    calls.trace[captured++] = t;
  };
  static LazyBackend *keep = nullptr; // the decoder's buffers must outlive the capture
  keep = new LazyBackend(std::move(o));
  model::SyntheticOptions so;
  so.dtype = DType::Q4_0;
  so.withVocab = false;
  so.zeroWeights = true;
  auto weights = model::generatePreset(preset, so);
  if (!weights.ok()) {
    std::fprintf(stderr, "bench: %s\n", std::string(weights.status().message()).c_str());
    std::abort();
  }
  auto decoder = model::Decoder::create(*keep, *weights);
  if (!decoder.ok()) {
    std::fprintf(stderr, "bench: %s\n", std::string(decoder.status().message()).c_str());
    std::abort();
  }
  (void)(*decoder)->step(1, 0);
  (void)(*decoder)->step(1, 1);
  if (captured != 2) {
    std::fprintf(stderr, "bench: captured %d decode steps, expected 2\n", captured);
    std::abort();
  }
  decoder->release(); // keep its buffers alive on `keep` for the replay
  return calls;
}

// Replays the captured steps in turn: every call through validation and recording, then the
// flush (a hit once the first two have found the parameters). Counters split the two.
void BM_DecodeStepWarm(benchmark::State &state, const char *preset) {
  // One capture per preset (BENCHMARK_CAPTURE instantiates this function once for all of them).
  static std::map<std::string, DecodeStepCalls> captured;
  if (!captured.count(preset))
    captured[preset] = captureSteps(preset);
  const DecodeStepCalls &calls = captured[preset];
  LazyBackend lazy(nullOptions());
  // Buffers of the same sizes on the replay backend (both steps use the same slots).
  std::vector<BufferHandle> handles;
  for (const TraceBuffer &b : calls.trace[0].buffers)
    handles.push_back(*lazy.allocate(b.sizeBytes));
  auto replay = [&](const Trace &trace) {
    for (const TraceEntry &e : trace.entries) {
      if (e.kind == TraceEntry::Kind::Upload) {
        const auto &bytes = *trace.payloads[e.payload];
        (void)lazy.copyToDevice(bytes, handles[e.uploadSlot]);
        continue;
      }
      OpCall op = e.op;
      for (int i = 0; i < opInfo(op.kind).numBuffers; ++i)
        op.buffers[i] = handles[Trace::slotOf(op.buffers[i])];
      if (absl::Status s = lazy.submit(op); !s.ok()) {
        std::fprintf(stderr, "bench: replay: %s\n", std::string(s.message()).c_str());
        std::abort();
      }
    }
  };
  for (int i = 0; i < 2; ++i) { // the two misses
    replay(calls.trace[i]);
    (void)lazy.synchronize();
  }
  const uint64_t missesBefore = lazy.stats().cache.misses;
  double recordNs = 0, flushNs = 0;
  int which = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    replay(calls.trace[which]);
    which ^= 1;
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(lazy.synchronize());
    auto t2 = std::chrono::steady_clock::now();
    recordNs += std::chrono::duration<double, std::nano>(t1 - t0).count();
    flushNs += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  double n = double(state.iterations());
  size_t calls_ = calls.trace[0].entries.size();
  state.counters["calls"] = double(calls_);
  state.counters["record_ns_per_call"] = recordNs / n / double(calls_);
  state.counters["flush_hit_us"] = flushNs / n / 1e3;
  state.counters["params"] = double(lazy.planParameters(calls.trace[0]).size());
  // Every timed flush must be a hit, or the figure is not the warm path's.
  state.counters["timed_misses"] = double(lazy.stats().cache.misses - missesBefore);
}
BENCHMARK_CAPTURE(BM_DecodeStepWarm, tinyllama, "tinyllama-1.1b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeStepWarm, stories260K, "stories260K")->Unit(benchmark::kMicrosecond);

} // namespace
} // namespace sinter

BENCHMARK_MAIN();
