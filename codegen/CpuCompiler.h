// CpuCompiler.h - the `cpu` backend's PlanCompiler: JIT-compiled kernels over host memory.
//
// Every kernel of a program is generated and compiled for the host CPU (codegen/llvm/CpuJit.h);
// the Plan calls the entry points with the buffer table and this run's parameters and splits each
// kernel's parallel dimension across a ThreadPool. Compiled kernels are cached by structural key,
// so the ~2400 calls of a decode step cost ~20 compilations once per process. The cache keeps the
// kernelCacheCapacity most recently used kernels: a spec holds values a caller chooses (eps,
// freq_base), and a kernel dropped from it lives on while a Plan uses it, its JIT code removed
// when the last one lets go. A kernel that fails to compile runs on the reference kernel
// instead, with one line on stderr; results never change.
// No MLIR in this header: the runtime and the backend factory include it.
#ifndef SINTER_CODEGEN_CPUCOMPILER_H
#define SINTER_CODEGEN_CPUCOMPILER_H

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codegen/KernelSpec.h"
#include "codegen/llvm/CpuJit.h"
#include "support/KernelProgram.h"
#include "support/LruMap.h"
#include "support/Plan.h"
#include "support/ThreadPool.h"

namespace sinter::codegen {

/// Kernels a CpuCompiler keeps by default. A decode step of tinyllama-1.1b runs 11 distinct ones
/// (KernelCountTest; llama-7b has the same kinds at other shapes), the first tokens' plans, with
/// their integers still fixed, about as many again: 256 leaves room for several models or shapes in
/// a process, so a decode never evicts, and bounds what a stream of distinct eps or freq_base
/// values can hold to about 10 KB of code a kernel, 2.5 MB in all.
inline constexpr size_t kDefaultKernelCacheCapacity = 256;

struct CpuCompilerOptions {
  /// Runs kernels' rows in parallel; ThreadPool::shared() when null. Must outlive the plans.
  ThreadPool *pool = nullptr;
  /// Kernels that touch fewer bytes than this (workBytes) run on the calling thread: below it a
  /// hand-off to the pool costs more than it saves.
  uint64_t minParallelBytes = 192 << 10;
  /// Test hook: ops for which it returns true get a kernel built to fail compilation, so the
  /// fallback to the reference kernel can be tested.
  std::function<bool(const OpCall &op)> failCompile;
  /// Print a line to stderr for each kernel that falls back (once per kernel shape).
  bool logFallbacks = true;
  /// Fold the rms_norm before a row loop into its quantized_matmuls (each call normalizes x into
  /// a stack buffer) instead of running it once before the loop. Off by default: it recomputes
  /// the norm in every call and, on the 2-core AVX-512 host, made no difference beyond the noise
  /// (sinter-bench-cpu-decode SideBySide, 4 repetitions: fused_norm_prologue vs fused from -4% to
  /// +4%; an earlier "7-10% slower" was the benchmark's order of modes, since rotated).
  bool fusePrologue = false;
  /// Kernels the cache keeps (least recently used dropped first; at least 1). Plans hold the
  /// kernels they run, so a small capacity costs recompilations, never results.
  size_t kernelCacheCapacity = kDefaultKernelCacheCapacity;
};

/// Counters over the life of a compiler.
struct CpuCompilerStats {
  uint64_t plans = 0;
  uint64_t kernelsCompiled = 0; ///< distinct kernels compiled (the cache's misses)
  uint64_t cacheHits = 0;       ///< ops whose kernel was compiled before
  uint64_t fallbacks = 0;       ///< distinct kernels that failed and run on the reference
  /// Fused kernels that run as one parallel loop: attention over all heads, and quantized_matmul
  /// groups (with their element-wise epilogues) over all their rows.
  uint64_t headLoops = 0;
  uint64_t rowLoops = 0;
  /// quantized_matmuls of row loops that run one generated kernel with their rms_norm prologue
  /// and/or element-wise epilogue (KernelSpec prologue/epilogue), counted per plan.
  uint64_t fusedKernels = 0;
  double compileSeconds = 0;  ///< wall time inside compile()
  uint64_t cachedKernels = 0; ///< kernels in the cache now (at most kernelCacheCapacity)
  uint64_t evictions = 0;     ///< kernels dropped from the cache to make room
  /// Phase times and the code loaded now: jit.liveKernels counts the kernels of every module
  /// the cache or a live Plan still holds, jit.liveModules those modules.
  CpuJitTimes jit;
};

/// The functions the cpu plan of one program kernel calls (CpuCompiler::functionsOf).
struct CpuKernelFunctions {
  std::vector<KernelSpec> specs;   ///< each distinct function once, in order of first use
  std::vector<int> memberFunction; ///< per member op: its function's index in specs (-1: upload)
};

class CpuCompiler : public PlanCompiler {
public:
  /// Fails (Internal) when the host cannot be JIT-compiled for.
  static absl::StatusOr<std::unique_ptr<CpuCompiler>> create(CpuCompilerOptions options = {});
  ~CpuCompiler() override;

  std::string name() const override { return "cpu-jit"; }
  /// The trace's unfused program (one kernel per op; uploads stay memcpy).
  absl::StatusOr<std::unique_ptr<Plan>> compile(const Trace &trace,
                                                const std::vector<IntSlot> &params) override;
  /// A program from the fusion pipeline. A kernel of attention groups (attn_score, softmax,
  /// attn_value per head) runs as one parallel loop over the heads; a kernel of quantized_matmuls
  /// (a horizontal group, each with its element-wise epilogue: residual add, SwiGLU) as one
  /// parallel loop over all their rows, the epilogue applied to each range of rows in the task
  /// that computed them; whatever comes before or after (rms_norm, rope, KV-cache writes) runs
  /// in order around the loop. Results are those of the unfused order, bit for bit. Any other
  /// kernel runs member by member.
  absl::StatusOr<std::unique_ptr<Plan>> compileProgram(const KernelProgram &program);

  /// The LLVM IR (optimized at O3, or as first translated) of the kernel that runs `op` when the
  /// integers whose bits are set in `paramMask` are Plan parameters. For sinter-dump.
  absl::StatusOr<std::string> kernelIR(const OpCall &op, uint8_t paramMask = 0,
                                       bool optimized = true);
  /// The host assembly of the same kernel (after O3, as the JIT emits it). For sinter-dump --asm.
  absl::StatusOr<std::string> kernelAsm(const OpCall &op, uint8_t paramMask = 0);
  /// Which function compileProgram's plan runs for each member op of each kernel of `program`,
  /// when every kernel compiles: a fused kernel (rms_norm prologue, quantized_matmul, epilogue)
  /// for the members it computes, each other member's own kernel. Compiles nothing.
  std::vector<CpuKernelFunctions> functionsOf(const KernelProgram &program);
  /// The optimized LLVM IR / host assembly of any spec (fused ones included).
  absl::StatusOr<std::string> specIR(const KernelSpec &spec, bool optimized = true);
  absl::StatusOr<std::string> specAsm(const KernelSpec &spec);
  /// The kernel name `op` gets under `paramMask` (the stem of its symbol), e.g.
  /// "quantized_matmul_q4_0_nc2048".
  static std::string kernelName(const OpCall &op, uint8_t paramMask = 0);

  /// "<cpu> <features>" as the kernels are compiled for.
  std::string hostDescription() const { return jit_->hostDescription(); }
  /// Q4_0/Q8_0 contractions quantize x to int8 and use VNNI dot products (CpuJit::int8Dot).
  bool int8Dot() const { return jit_->int8Dot(); }
  CpuCompilerStats stats() const;

private:
  struct CachedKernel {
    KernelFn fn = nullptr; ///< null: failed, run on the reference kernel
    std::string name;
    std::shared_ptr<const CpuJitModule> code; ///< owns fn's code (null when it failed)
  };

  CpuCompiler(CpuCompilerOptions options, std::shared_ptr<CpuJit> jit);
  KernelSpec specFor(const OpCall &op, uint8_t paramMask) const;
  /// Compiles `specs` (one module; one by one when that fails) and caches them; in order.
  std::vector<CachedKernel> compileMissing(const std::vector<KernelSpec> &specs,
                                           const std::vector<OpCall> &ops);
  /// The kernel of each spec (fn null where it failed), compiling those not cached yet. The
  /// results hold their code whatever the cache drops meanwhile.
  std::vector<CachedKernel> kernelsFor(const std::vector<KernelSpec> &specs,
                                       const std::vector<OpCall> &ops);

  CpuCompilerOptions options_;
  std::shared_ptr<CpuJit> jit_;
  mutable std::mutex mu_;
  LruMap<std::string, CachedKernel> cache_;
  CpuCompilerStats stats_;
};

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_CPUCOMPILER_H
