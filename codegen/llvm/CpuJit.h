// CpuJit.h - compiles kernel specs to host machine code through MLIR and LLVM (no MLIR here).
//
// The pipeline: the kernel builders (CpuEmitter.h) emit func/scf/arith/math/vector/llvm ops; the
// module is lowered to the LLVM dialect, translated to LLVM IR, optimized at O3 for the host CPU
// (its name and feature list as LLVM detects them, e.g. AVX-512 and VNNI where present) and
// handed to an ORC LLJIT. Several kernels are compiled as one module so that a plan's cold
// compile pays the per-module costs once. Failures come back as Status, never as aborts.
//
// With SINTER_CACHE_DIR set, each module's object code is also kept on disk, keyed by a SHA-256 of
// the LLVM version, the host CPU and features, and the module's unoptimized LLVM IR (which holds
// every kernel's code and symbol name); a later CpuJit that compiles the same module loads the
// object instead of running O3 and code generation. The names are numbered per CpuJit, so a
// process that compiles the same kernels in the same order hits. A corrupt entry (checked by a
// digest of its bytes) or an unwritable directory gives a warning on stderr and a normal
// compilation.
//
// Each compile() adds its module to the JIT under a resource tracker of its own, owned by the
// CpuJitModule it returns: when the last owner lets go, the code is removed from the JIT (its
// memory unmapped, its symbols dropped), so a caller that keeps a bounded set of modules keeps a
// bounded JIT.
#ifndef SINTER_CODEGEN_LLVM_CPUJIT_H
#define SINTER_CODEGEN_LLVM_CPUJIT_H

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "codegen/KernelSpec.h"

namespace sinter::codegen {

/// Seconds spent in each compile phase, summed over the life of a CpuJit, the disk cache's
/// counters (all zero without SINTER_CACHE_DIR) and the code now loaded.
struct CpuJitTimes {
  double build = 0;    ///< kernel builders and verification
  double lower = 0;    ///< MLIR passes to the LLVM dialect and translation to LLVM IR
  double optimize = 0; ///< the LLVM O3 pipeline
  double codegen = 0;  ///< machine code and linking (inside the JIT)
  uint64_t modules = 0;
  uint64_t kernels = 0;
  uint64_t diskHits = 0;       ///< modules loaded from SINTER_CACHE_DIR (no O3, no code generation)
  uint64_t diskWrites = 0;     ///< modules compiled and written to SINTER_CACHE_DIR
  uint64_t diskErrors = 0;     ///< corrupt entries and failed writes (each logged, then compiled)
  uint64_t liveModules = 0;    ///< modules whose code is loaded (a CpuJitModule owns each)
  uint64_t liveKernels = 0;    ///< kernels of those modules
  uint64_t removedModules = 0; ///< modules whose last owner let go, their code removed
  uint64_t contexts = 0;       ///< MLIR contexts made (a fresh one every kKernelsPerContext)
};

/// The machine code of one CpuJit::compile call (opaque). The last shared_ptr to let go removes
/// the code from the JIT; the JIT itself lives at least as long.
struct CpuJitModule;

/// What CpuJit::compile returns: the entry points, valid while `code` (or a copy of it) lives.
struct CpuJitKernels {
  std::vector<KernelFn> entries;
  std::shared_ptr<const CpuJitModule> code;
};

class CpuJit {
public:
  /// A JIT for the host, with the disk cache in SINTER_CACHE_DIR when that is set. Internal when
  /// LLVM cannot target the host.
  static absl::StatusOr<std::unique_ptr<CpuJit>> create();
  /// The same with the disk cache in `cacheDir` ("" for none), whatever the environment says.
  static absl::StatusOr<std::unique_ptr<CpuJit>> create(const std::string &cacheDir);
  ~CpuJit();
  CpuJit(const CpuJit &) = delete;
  CpuJit &operator=(const CpuJit &) = delete;

  /// Compiles all of `specs` as one module and returns their entry points in order. Any failure
  /// (a builder that cannot handle a spec, a verifier or LLVM error) fails the whole call with
  /// the kernel named, and leaves nothing in the JIT; the caller may retry the specs one by one
  /// to isolate it. The code lives as long as the returned `code`, even past this object.
  /// Thread-safe.
  absl::StatusOr<CpuJitKernels> compile(absl::Span<const KernelSpec> specs);

  /// The LLVM IR of `spec`'s kernel: after the O3 pipeline when `optimized`, else as translated
  /// from MLIR. Compiles nothing into the JIT.
  absl::StatusOr<std::string> llvmIR(const KernelSpec &spec, bool optimized = true);

  /// The host assembly (AT&T syntax) of `spec`'s kernel after O3, as the JIT would emit it.
  /// Compiles nothing into the JIT.
  absl::StatusOr<std::string> assembly(const KernelSpec &spec);

  /// The host as the code is compiled for: "<cpu> <feature,feature,...>".
  std::string hostDescription() const;
  /// Whether Q4_0 and Q8_0 contractions quantize x to int8 (Q8_0-style, per block of 32) and use
  /// AVX-512 VNNI dot products: the host has avx512vnni and avx512bw, and neither
  /// SINTER_INT8_DOT=0 nor SINTER_PRECISE=1 was set when this JIT was created. Results then agree
  /// with the reference within SEMANTICS.md's 5e-4 NMSE for quantized activations, not 1e-7.
  bool int8Dot() const;
  /// Phase times, disk cache counters and the code loaded now.
  CpuJitTimes times() const;
  /// The disk cache directory ("" when there is none).
  std::string cacheDir() const;

  /// Kernels lowered in one MLIR context before the next compile makes a fresh one: a context
  /// keeps every attribute it ever saw (each kernel's unique symbol name, each eps), so one
  /// context for the life of the JIT would grow with every distinct kernel.
  static constexpr uint64_t kKernelsPerContext = 1024;

private:
  friend struct CpuJitModule;
  struct Impl;
  explicit CpuJit(std::shared_ptr<Impl> impl);
  /// Shared with every CpuJitModule, whose removal needs the JIT.
  std::shared_ptr<Impl> impl_;
};

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_LLVM_CPUJIT_H
