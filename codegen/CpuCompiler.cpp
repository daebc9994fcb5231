// CpuCompiler.cpp - programs to CPU plans: kernel cache, fallback, and the plan that runs them.
//
// compile() looks every member op's kernel up by structural key, compiles the missing ones in one
// JIT module (so a cold plan pays per-module costs once), and isolates a failure by compiling the
// batch one kernel at a time. The plan's run loop does no allocation: per op it patches the
// parameters into an int64 array, gathers three buffer addresses and calls the entry point,
// inline or across the pool.
#include "codegen/CpuCompiler.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/FaultInjection.h" // inline checks only: no link dependency on the runtime

namespace sinter::codegen {

namespace {

// Each parallel chunk should move at least this much memory.
constexpr uint64_t kMinChunkBytes = 32 << 10;

uint8_t paramMaskOf(const KernelMember &op) {
  uint8_t mask = 0;
  for (int i = 0; i < 5; ++i)
    if (op.paramOf[i] >= 0)
      mask |= uint8_t(1u << i);
  return mask;
}

// One step of a CPU plan: an upload, or one op on its kernel (fn null: the reference kernel).
struct Step {
  KernelMember op;
  bool upload = false;
  KernelFn fn = nullptr;
  std::string kernelName;
  size_t kernelIndex = 0; ///< the program kernel this step belongs to
};

class CpuPlan : public Plan {
public:
  CpuPlan(std::vector<Step> steps, size_t launches, std::string description,
          std::shared_ptr<CpuJit> jit, ThreadPool *pool, uint64_t minParallelBytes)
      : steps_(std::move(steps)), launches_(launches), description_(std::move(description)),
        jit_(std::move(jit)), pool_(pool), minParallelBytes_(minParallelBytes) {}

  absl::Status run(const PlanArgs &args) override {
    for (const Step &step : steps_) {
      const TraceEntry &entry = step.op.entry;
      if (step.upload) {
        const std::vector<uint8_t> &bytes = *args.payloads[entry.payload];
        std::memcpy(args.slotData[entry.uploadSlot], bytes.data(), entry.uploadBytes);
        continue;
      }
      if (!step.fn) {
        OpCall op = boundOp(step.op, args.params);
        executeReference(op, [&](BufferHandle h) { return args.slotData[Trace::slotOf(h)]; });
        continue;
      }
      runKernel(step, args);
    }
    return absl::OkStatus();
  }

  size_t numKernels() const override { return launches_; }
  std::string describe() const override { return description_; }

private:
  void runKernel(const Step &step, const PlanArgs &args) const {
    const OpCall &op = step.op.entry.op;
    int64_t ints[5];
    for (int i = 0; i < 5; ++i) {
      int32_t p = step.op.paramOf[i];
      ints[i] = static_cast<int64_t>(p >= 0 ? args.params[p] : op.ints[i]);
    }
    uint8_t *buffers[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < opInfo(op.kind).numBuffers; ++i)
      buffers[i] = args.slotData[Trace::slotOf(op.buffers[i])];
    uint64_t units = parallelSize(op.kind, ints);
    if (units == 0)
      return;
    uint64_t bytes = workBytes(op.kind, op.dtype, ints);
    KernelFn fn = step.fn;
    if (units == 1 || bytes < minParallelBytes_ || pool_->size() == 1) {
      fn(buffers, ints, 0, static_cast<int64_t>(units));
      return;
    }
    uint64_t grain = std::max<uint64_t>(1, units * kMinChunkBytes / std::max<uint64_t>(bytes, 1));
    pool_->parallelFor(
        units,
        [&](uint64_t begin, uint64_t end) {
          fn(buffers, ints, static_cast<int64_t>(begin), static_cast<int64_t>(end));
        },
        grain);
  }

  std::vector<Step> steps_;
  size_t launches_;
  std::string description_;
  std::shared_ptr<CpuJit> jit_; ///< keeps the code alive
  ThreadPool *pool_;
  uint64_t minParallelBytes_;
};

} // namespace

CpuCompiler::CpuCompiler(CpuCompilerOptions options, std::shared_ptr<CpuJit> jit)
    : options_(std::move(options)), jit_(std::move(jit)) {
  if (!options_.pool)
    options_.pool = &ThreadPool::shared();
}

CpuCompiler::~CpuCompiler() = default;

absl::StatusOr<std::unique_ptr<CpuCompiler>> CpuCompiler::create(CpuCompilerOptions options) {
  absl::StatusOr<std::unique_ptr<CpuJit>> jit = CpuJit::create();
  if (!jit.ok())
    return jit.status();
  return std::unique_ptr<CpuCompiler>(
      new CpuCompiler(std::move(options), std::shared_ptr<CpuJit>(std::move(*jit))));
}

KernelSpec CpuCompiler::specFor(const OpCall &op, uint8_t paramMask) const {
  KernelSpec spec = singleOpSpec(op, paramMask);
  spec.injectFailure = (options_.failCompile && options_.failCompile(op)) ||
                       runtime::fault::fires(runtime::fault::Site::KernelCompile);
  return spec;
}

std::string CpuCompiler::kernelName(const OpCall &op, uint8_t paramMask) {
  return singleOpSpec(op, paramMask).name();
}

void CpuCompiler::compileMissing(const std::vector<KernelSpec> &specs,
                                 const std::vector<OpCall> &ops) {
  if (specs.empty())
    return;
  absl::StatusOr<std::vector<KernelFn>> batch = jit_->compile(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    CachedKernel &cached = cache_[specs[i].key()];
    cached.name = specs[i].name();
    if (batch.ok()) {
      cached.fn = (*batch)[i];
      ++stats_.kernelsCompiled;
      continue;
    }
    // Isolate the failure: every kernel that compiles alone still gets its code.
    absl::StatusOr<std::vector<KernelFn>> single =
        specs.size() == 1 ? batch : jit_->compile({&specs[i], 1});
    if (single.ok()) {
      cached.fn = (*single)[0];
      ++stats_.kernelsCompiled;
      continue;
    }
    cached.fn = nullptr;
    ++stats_.fallbacks;
    if (options_.logFallbacks)
      std::fprintf(stderr,
                   "sinter: kernel %s (%s) failed to compile: %s; running it on the "
                   "reference kernel\n",
                   cached.name.c_str(), describeOp(ops[i]).c_str(),
                   std::string(single.status().message()).c_str());
  }
}

absl::StatusOr<std::unique_ptr<Plan>> CpuCompiler::compile(const Trace &trace,
                                                           const std::vector<IntSlot> &params) {
  return compileProgram(unfusedProgram(trace, params));
}

absl::StatusOr<std::unique_ptr<Plan>> CpuCompiler::compileProgram(const KernelProgram &program) {
  auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  // Pass 1: the specs of every member op; collect the ones not cached (each once).
  std::vector<Step> steps;
  std::vector<std::string> keys;
  std::vector<KernelSpec> missing;
  std::vector<OpCall> missingOps;
  absl::flat_hash_map<std::string, bool> queued;
  size_t launches = 0;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel &kernel = program.kernels[k];
    launches += !kernel.hostCopy;
    for (const KernelMember &member : kernel.ops) {
      Step step;
      step.op = member;
      step.kernelIndex = k;
      step.upload = member.entry.kind == TraceEntry::Kind::Upload;
      keys.emplace_back();
      if (!step.upload) {
        KernelSpec spec = specFor(member.entry.op, paramMaskOf(member));
        keys.back() = spec.key();
        if (cache_.contains(keys.back()) || !queued.emplace(keys.back(), true).second) {
          ++stats_.cacheHits; // compiled before, or queued for an earlier op of this program
        } else {
          missing.push_back(std::move(spec));
          missingOps.push_back(member.entry.op);
        }
      }
      steps.push_back(std::move(step));
    }
  }
  compileMissing(missing, missingOps);
  // Pass 2: bind entry points and describe the plan.
  std::string description;
  for (size_t i = 0; i < steps.size(); ++i) {
    Step &step = steps[i];
    const Kernel &kernel = program.kernels[step.kernelIndex];
    if (step.upload) {
      absl::StrAppend(&description, "host copy ", step.kernelIndex, ": slot ",
                      step.op.entry.uploadSlot, " ", step.op.entry.uploadBytes, " bytes\n");
      continue;
    }
    const CachedKernel &cached = cache_.at(keys[i]);
    step.fn = cached.fn;
    step.kernelName = cached.name;
    absl::StrAppend(&description, "kernel ", step.kernelIndex, " ", kernel.name, ": ",
                    step.fn ? "jit " : "reference (failed to compile) ", cached.name, ": ",
                    describeOp(step.op.entry.op), "\n");
  }
  ++stats_.plans;
  stats_.compileSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::unique_ptr<Plan>(new CpuPlan(std::move(steps), launches, std::move(description), jit_,
                                           options_.pool, options_.minParallelBytes));
}

absl::StatusOr<std::string> CpuCompiler::kernelIR(const OpCall &op, uint8_t paramMask,
                                                  bool optimized) {
  return jit_->llvmIR(specFor(op, paramMask), optimized);
}

CpuCompilerStats CpuCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CpuCompilerStats s = stats_;
  s.jit = jit_->times();
  return s;
}

} // namespace sinter::codegen
