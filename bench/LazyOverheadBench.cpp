// LazyOverheadBench.cpp - host cost of the lazy backend's warm path.
//
// Issue 4's numbers: the median host cost per recorded call, and the cost of a decode step's
// flush on a plan-cache hit, for tinyllama-1.1b dimensions. Plans here do not execute (a null
// compiler), so what is timed is exactly the runtime's own work: validation, recording, the
// structural comparison of a hit, and parameter extraction. The decode step's calls come from
// the real driver (tools/model) recording one token.
#include <chrono>
#include <cstdio>

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

// The calls of one tinyllama-1.1b decode step (Q4_0 weights), captured from the driver.
struct DecodeStepCalls {
  Trace trace;
  std::vector<BufferHandle> slotHandles;
};

// Records one step of the driver on `lazy` and returns its calls (the first flush's trace).
DecodeStepCalls captureStep(const std::string &preset) {
  DecodeStepCalls calls;
  bool captured = false;
  LazyBackendOptions o = nullOptions();
  o.onFlush = [&](const Trace &t, absl::Span<const BufferHandle> handles) {
    if (captured || t.entries.size() < 16)
      return; // skip flushes of the weight upload
    calls.trace = t;
    calls.slotHandles.assign(handles.begin(), handles.end());
    captured = true;
  };
  static LazyBackend *keep = nullptr; // the decoder's buffers must outlive the capture
  keep = new LazyBackend(std::move(o));
  model::SyntheticOptions so;
  so.dtype = DType::Q4_0;
  so.withVocab = false;
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
  decoder->release(); // keep its buffers alive on `keep` for the replay
  return calls;
}

// Replays the captured step: every call through validation and recording, then the flush (a
// hit after the first iteration). Counters split the two.
void BM_DecodeStepWarm(benchmark::State &state, const char *preset) {
  static DecodeStepCalls calls = captureStep(preset);
  LazyBackend lazy(nullOptions());
  // Buffers of the same sizes on the replay backend.
  std::vector<BufferHandle> handles;
  for (const TraceBuffer &b : calls.trace.buffers)
    handles.push_back(*lazy.allocate(b.sizeBytes));
  auto replay = [&] {
    for (const TraceEntry &e : calls.trace.entries) {
      if (e.kind == TraceEntry::Kind::Upload) {
        const auto &bytes = *calls.trace.payloads[e.payload];
        (void)lazy.copyToDevice(bytes, handles[e.uploadSlot]);
        continue;
      }
      OpCall op = e.op;
      for (int i = 0; i < opInfo(op.kind).numBuffers; ++i)
        op.buffers[i] = handles[Trace::slotOf(op.buffers[i])];
      (void)lazy.submit(op);
    }
  };
  replay();
  (void)lazy.synchronize(); // the miss
  double recordNs = 0, flushNs = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    replay();
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(lazy.synchronize());
    auto t2 = std::chrono::steady_clock::now();
    recordNs += std::chrono::duration<double, std::nano>(t1 - t0).count();
    flushNs += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  double n = double(state.iterations());
  size_t calls_ = calls.trace.entries.size();
  state.counters["calls"] = double(calls_);
  state.counters["record_ns_per_call"] = recordNs / n / double(calls_);
  state.counters["flush_hit_us"] = flushNs / n / 1e3;
  state.counters["hits"] = double(lazy.stats().cache.hits);
}
BENCHMARK_CAPTURE(BM_DecodeStepWarm, tinyllama, "tinyllama-1.1b")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DecodeStepWarm, stories260K, "stories260K")->Unit(benchmark::kMicrosecond);

} // namespace
} // namespace sinter

BENCHMARK_MAIN();
