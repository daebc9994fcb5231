// CpuJit.cpp - MLIR module -> LLVM dialect -> LLVM IR -> O3 -> ORC LLJIT.
//
// One MLIRContext and one LLJIT per CpuJit. MLIR diagnostics and LLVM errors are captured into
// the returned Status (the JIT session's own error reporter is silenced for the same reason), so
// a kernel that fails to compile never aborts the process and never prints half a message.
// The disk cache (SINTER_CACHE_DIR) is an llvm::ObjectCache on the JIT's compile function: a
// module whose key has a valid entry skips O3 and the cache hands its object to the compiler; a
// module compiled normally is written (to a temporary name, then renamed) when its object is
// ready. An entry is a magic line, the SHA-256 of the object and the object.
// Every module is added under a ResourceTracker of its own; the CpuJitModule that owns it calls
// remove() when its last owner lets go, and the session's dead symbol names are then purged.
#include "codegen/llvm/CpuJit.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/llvm/CpuEmitter.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/ObjectCache.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Operator.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

namespace sinter::codegen {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string errorText(llvm::Error error) { return llvm::toString(std::move(error)); }

// Collects MLIR diagnostics while alive.
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(mlir::MLIRContext &context)
      : handler_(&context, [this](mlir::Diagnostic &d) {
          if (!text_.empty())
            text_ += "; ";
          text_ += d.str();
          return mlir::success();
        }) {}
  const std::string &text() const { return text_; }

private:
  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

// Bump when the optimization pipeline or the entry format changes: old entries then never match.
constexpr char kCacheFormat[] = "sinter-object-cache-v1";
constexpr char kEntryMagic[] = "SINTEROBJ1\n";
constexpr size_t kDigestBytes = 32;

std::string hexDigest(llvm::StringRef text) {
  llvm::SHA256 hash;
  hash.update(text);
  return llvm::toHex(hash.final(), /*LowerCase=*/true);
}

// Object code on disk by module identifier ("sinter-<key>"). compile() preloads a valid entry
// before adding its module; the JIT's compiler then asks getObject() and skips code generation.
class DiskObjectCache : public llvm::ObjectCache {
public:
  explicit DiskObjectCache(std::string dir) : dir_(std::move(dir)) {}

  const std::string &dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }

  /// Reads and checks the entry of `key`; true when it is valid (kept for getObject). A missing
  /// entry is false silently, a corrupt one with a warning.
  bool preload(const std::string &key) {
    std::string path = pathOf(key);
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return false;
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t header = sizeof(kEntryMagic) - 1 + kDigestBytes * 2;
    if (bytes.size() <= header || bytes.compare(0, sizeof(kEntryMagic) - 1, kEntryMagic) != 0 ||
        hexDigest(llvm::StringRef(bytes).substr(header)) !=
            llvm::StringRef(bytes).substr(sizeof(kEntryMagic) - 1, kDigestBytes * 2)) {
      ++errors_;
      warn(absl::StrCat("cache entry ", path, " (", bytes.size(),
                        " bytes) is corrupt; compiling the kernels again"));
      return false;
    }
    preloaded_[moduleId(key)] =
        llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(bytes).substr(header), moduleId(key));
    return true;
  }

  /// Drops a preloaded object that was not used (its module failed before code generation).
  void forget(const std::string &key) { preloaded_.erase(moduleId(key)); }

  static std::string moduleId(const std::string &key) { return "sinter-" + key; }

  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module *module) override {
    auto it = preloaded_.find(module->getModuleIdentifier());
    if (it == preloaded_.end())
      return nullptr;
    std::unique_ptr<llvm::MemoryBuffer> object = std::move(it->second);
    preloaded_.erase(it);
    return object;
  }

  void notifyObjectCompiled(const llvm::Module *module, llvm::MemoryBufferRef object) override {
    llvm::StringRef id = module->getModuleIdentifier();
    if (!enabled() || !id.starts_with("sinter-"))
      return;
    std::string path = pathOf(id.drop_front(7).str());
    std::string temp = absl::StrCat(path, ".tmp.", ::getpid(), ".", tempCounter_++);
    std::error_code error;
    std::filesystem::create_directories(dir_, error);
    {
      std::ofstream out(temp, std::ios::binary | std::ios::trunc);
      out << kEntryMagic << hexDigest(object.getBuffer());
      out.write(object.getBufferStart(), std::streamsize(object.getBufferSize()));
      out.close();
      if (!out) {
        std::filesystem::remove(temp, error);
        ++errors_;
        warn(absl::StrCat("cannot write ", temp, " (", object.getBufferSize(),
                          " bytes of object code); the kernels stay compiled in memory only"));
        return;
      }
    }
    std::filesystem::rename(temp, path, error);
    if (error) {
      std::filesystem::remove(temp, error);
      ++errors_;
      warn(absl::StrCat("cannot rename ", temp, " to ", path, ": ", error.message()));
      return;
    }
    ++writes_;
  }

  uint64_t writes() const { return writes_; }
  uint64_t errors() const { return errors_; }

  static void warn(const std::string &what) {
    std::fprintf(stderr, "sinter: warning: SINTER_CACHE_DIR: %s\n", what.c_str());
  }

private:
  std::string pathOf(const std::string &key) const { return absl::StrCat(dir_, "/", key, ".o"); }

  std::string dir_;
  std::map<std::string, std::unique_ptr<llvm::MemoryBuffer>> preloaded_;
  uint64_t tempCounter_ = 0;
  uint64_t writes_ = 0;
  uint64_t errors_ = 0;
};

} // namespace

static bool hasFeature(llvm::StringRef features, llvm::StringRef name) {
  for (llvm::StringRef f : llvm::split(features, ','))
    if (f.consume_front("+") && f == name)
      return true;
  return false;
}

static bool envIs(const char *name, const char *value) {
  const char *v = std::getenv(name);
  return v && std::string(v) == value;
}

static bool int8DotWanted(llvm::StringRef features) {
  if (envIs("SINTER_INT8_DOT", "0") || envIs("SINTER_PRECISE", "1"))
    return false;
  return hasFeature(features, "avx512vnni") && hasFeature(features, "avx512bw");
}

// SINTER_PRECISE=1: kernels compute IEEE f32 in program order. The emitters mark multiply-adds
// `contract` (so LLVM may form fma) and let vector reductions reassociate; precise mode clears
// every fast-math flag, lowers reductions in order and tells the target not to fuse.
static bool preciseMode() {
  const char *v = std::getenv("SINTER_PRECISE");
  return v && std::string(v) == "1";
}

static void stripFastMath(llvm::Function &f) {
  for (llvm::BasicBlock &block : f)
    for (llvm::Instruction &inst : block)
      if (llvm::isa<llvm::FPMathOperator>(inst))
        inst.copyFastMathFlags(llvm::FastMathFlags());
}

struct CpuJit::Impl {
  std::unique_ptr<mlir::MLIRContext> context;
  uint64_t contextKernels = 0; ///< kernels lowered in `context` (CpuJit::kKernelsPerContext)
  std::unique_ptr<llvm::TargetMachine> machine;
  std::unique_ptr<DiskObjectCache> cache; ///< before jit: the JIT's compiler points to it
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::string cpu;
  std::string features;
  bool precise = false; ///< SINTER_PRECISE=1 (preciseMode)
  /// Q4_0/Q8_0 contractions with VNNI int8 dot products: the host has avx512vnni and avx512bw,
  /// and SINTER_INT8_DOT is not 0 (nor SINTER_PRECISE=1, which keeps activations in f32).
  bool int8Dot = false;
  std::mutex mu;
  uint64_t nextId = 0;
  CpuJitTimes times;

  // Builds `specs` as functions `names` and lowers them to an optimized LLVM module.
  absl::StatusOr<std::unique_ptr<llvm::Module>> lower(absl::Span<const KernelSpec> specs,
                                                      const std::vector<std::string> &names,
                                                      llvm::LLVMContext &llvmContext,
                                                      bool optimize);
  void optimizeModule(llvm::Module &module);
  // The disk cache key of `module` (unoptimized): the LLVM version, the host and the IR.
  std::string cacheKey(const llvm::Module &module) const;
  // A fresh MLIR context (the old one, if any, and everything it interned are freed).
  void makeContext();
  // Removes a module's code from the JIT (with mu held).
  void removeCode(const llvm::orc::ResourceTrackerSP &tracker, size_t kernels);
};

// Owns one module's ResourceTracker; the last owner's release removes the code.
struct CpuJitModule {
  CpuJitModule(std::shared_ptr<CpuJit::Impl> impl, llvm::orc::ResourceTrackerSP tracker,
               size_t kernels)
      : impl(std::move(impl)), tracker(std::move(tracker)), kernels(kernels) {}
  ~CpuJitModule() {
    std::lock_guard<std::mutex> lock(impl->mu);
    impl->removeCode(tracker, kernels);
  }
  CpuJitModule(const CpuJitModule &) = delete;
  CpuJitModule &operator=(const CpuJitModule &) = delete;

  std::shared_ptr<CpuJit::Impl> impl;
  llvm::orc::ResourceTrackerSP tracker;
  size_t kernels;
};

void CpuJit::Impl::makeContext() {
  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::LLVM::LLVMDialect, mlir::math::MathDialect, mlir::scf::SCFDialect,
                  mlir::vector::VectorDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  context.reset(); // before the new one: the two never coexist
  context = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  contextKernels = 0;
  ++times.contexts;
}

void CpuJit::Impl::removeCode(const llvm::orc::ResourceTrackerSP &tracker, size_t kernels) {
  if (llvm::Error error = tracker->remove())
    // The session already counts the memory as released; nothing a caller could do about it.
    std::fprintf(stderr, "sinter: warning: cpu jit: removing a module: %s\n",
                 errorText(std::move(error)).c_str());
  // The removed symbols' names stay in the session's string pool until purged.
  jit->getExecutionSession().getSymbolStringPool()->clearDeadEntries();
  --times.liveModules;
  times.liveKernels -= kernels;
  ++times.removedModules;
}

std::string CpuJit::Impl::cacheKey(const llvm::Module &module) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << kCacheFormat << "\n"
     << LLVM_VERSION_STRING << "\n"
     << (precise ? "precise\n" : "") << cpu << "\n"
     << features << "\n";
  module.print(os, nullptr);
  os.flush();
  return hexDigest(text);
}

absl::StatusOr<std::unique_ptr<llvm::Module>>
CpuJit::Impl::lower(absl::Span<const KernelSpec> specs, const std::vector<std::string> &names,
                    llvm::LLVMContext &llvmContext, bool optimize) {
  if (contextKernels >= CpuJit::kKernelsPerContext)
    makeContext();
  contextKernels += specs.size();
  auto start = Clock::now();
  DiagnosticCapture diagnostics(*context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(context.get()));
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::Status built = cpu::buildKernel(*module, specs[i], names[i], int8Dot);
    if (!built.ok())
      return built;
  }
  if (mlir::failed(mlir::verify(*module)))
    return absl::InternalError(absl::StrCat("verifier: ", diagnostics.text()));
  times.build += secondsSince(start);

  start = Clock::now();
  mlir::PassManager pm(context.get());
  pm.addPass(mlir::createConvertSCFToCFPass());
  mlir::ConvertVectorToLLVMPassOptions vectorOptions;
  vectorOptions.reassociateFPReductions = !precise;
  pm.addPass(mlir::createConvertVectorToLLVMPass(vectorOptions));
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(pm.run(*module)))
    return absl::InternalError(absl::StrCat("lowering to the llvm dialect: ", diagnostics.text()));
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::translateModuleToLLVMIR(*module, llvmContext, "sinter_kernels");
  if (!llvmModule)
    return absl::InternalError(absl::StrCat("translation to llvm ir: ", diagnostics.text()));
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple().str());
  for (llvm::Function &f : *llvmModule) {
    if (f.isDeclaration())
      continue;
    f.addFnAttr("target-cpu", cpu);
    f.addFnAttr("target-features", features);
    f.addFnAttr(llvm::Attribute::NoUnwind);
    if (precise)
      stripFastMath(f);
  }
  times.lower += secondsSince(start);
  if (!optimize)
    return llvmModule;

  start = Clock::now();
  optimizeModule(*llvmModule);
  times.optimize += secondsSince(start);
  return llvmModule;
}

void CpuJit::Impl::optimizeModule(llvm::Module &module) {
  // O3 without LLVM's loop and SLP vectorizers and loop unroller: the builders emit vector code
  // and unroll the hot loops themselves. Left on, the vectorizers re-vectorize the scalar
  // remainder loops (behind runtime alias checks, since buffers may alias) and the unroller
  // multiplies every runtime-bounded loop by 8: twice the compile time and code, same speed
  // (measured with sinter-bench-cpu).
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = false;
  tuning.SLPVectorization = false;
  tuning.LoopUnrolling = false;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(machine.get(), tuning);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager pipeline =
      builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  pipeline.run(module, mam);
}

CpuJit::CpuJit(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuJit::~CpuJit() = default;

absl::StatusOr<std::unique_ptr<CpuJit>> CpuJit::create() {
  const char *dir = std::getenv("SINTER_CACHE_DIR");
  return create(dir ? dir : "");
}

absl::StatusOr<std::unique_ptr<CpuJit>> CpuJit::create(const std::string &cacheDir) {
  static std::once_flag once;
  static bool nativeOk = false;
  std::call_once(once, [] {
    nativeOk = !llvm::InitializeNativeTarget() && !llvm::InitializeNativeTargetAsmPrinter();
  });
  if (!nativeOk)
    return absl::InternalError("cpu jit: llvm has no native target for this host");

  auto impl = std::make_shared<Impl>();
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> builder =
      llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return absl::InternalError(
        absl::StrCat("cpu jit: detecting the host: ", errorText(builder.takeError())));
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  impl->precise = preciseMode();
  if (impl->precise)
    builder->getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;
  impl->cpu = builder->getCPU();
  impl->features = builder->getFeatures().getString();
  impl->int8Dot = int8DotWanted(impl->features);
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> machine = builder->createTargetMachine();
  if (!machine)
    return absl::InternalError(
        absl::StrCat("cpu jit: target machine: ", errorText(machine.takeError())));
  impl->machine = std::move(*machine);
  impl->cache = std::make_unique<DiskObjectCache>(cacheDir);

  DiskObjectCache *cache = impl->cache.get();
  llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> jit =
      llvm::orc::LLJITBuilder()
          .setJITTargetMachineBuilder(std::move(*builder))
          .setCompileFunctionCreator(
              [cache](llvm::orc::JITTargetMachineBuilder target)
                  -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
                llvm::Expected<std::unique_ptr<llvm::TargetMachine>> tm =
                    target.createTargetMachine();
                if (!tm)
                  return tm.takeError();
                return std::make_unique<llvm::orc::TMOwningSimpleCompiler>(std::move(*tm), cache);
              })
          .create();
  if (!jit)
    return absl::InternalError(absl::StrCat("cpu jit: lljit: ", errorText(jit.takeError())));
  impl->jit = std::move(*jit);
  // Lookup failures come back through compile(); the default reporter would print them too.
  impl->jit->getExecutionSession().setErrorReporter(
      [](llvm::Error error) { llvm::consumeError(std::move(error)); });
  // Kernels call the C library (memmove; pow, sin and cos in rope).
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      impl->jit->getDataLayout().getGlobalPrefix());
  if (!process)
    return absl::InternalError(
        absl::StrCat("cpu jit: process symbols: ", errorText(process.takeError())));
  impl->jit->getMainJITDylib().addGenerator(std::move(*process));

  impl->makeContext();
  return std::unique_ptr<CpuJit>(new CpuJit(std::move(impl)));
}

absl::StatusOr<CpuJitKernels> CpuJit::compile(absl::Span<const KernelSpec> specs) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::string> names;
  for (const KernelSpec &spec : specs)
    names.push_back(absl::StrCat("sinter_", impl_->nextId++, "_", spec.name()));
  auto llvmContext = std::make_unique<llvm::LLVMContext>();
  auto failure = [&](const absl::Status &status) {
    std::vector<std::string> kernelNames;
    for (const KernelSpec &spec : specs)
      kernelNames.push_back(spec.name());
    return absl::Status(status.code(),
                        absl::StrCat(absl::StrJoin(kernelNames, ", "), ": ", status.message()));
  };
  absl::StatusOr<std::unique_ptr<llvm::Module>> module =
      impl_->lower(specs, names, *llvmContext, /*optimize=*/false);
  if (!module.ok())
    return failure(module.status());
  std::string key;
  bool fromDisk = false;
  if (impl_->cache->enabled()) {
    key = impl_->cacheKey(**module);
    (*module)->setModuleIdentifier(DiskObjectCache::moduleId(key));
    fromDisk = impl_->cache->preload(key);
  }
  if (!fromDisk) {
    auto start = Clock::now();
    impl_->optimizeModule(**module);
    impl_->times.optimize += secondsSince(start);
  }

  auto start = Clock::now();
  llvm::orc::ThreadSafeModule threadSafe(std::move(*module), std::move(llvmContext));
  llvm::orc::ResourceTrackerSP tracker = impl_->jit->getMainJITDylib().createResourceTracker();
  if (llvm::Error error = impl_->jit->addIRModule(tracker, std::move(threadSafe))) {
    impl_->cache->forget(key);
    return failure(absl::InternalError(absl::StrCat("jit: ", errorText(std::move(error)))));
  }
  ++impl_->times.liveModules;
  impl_->times.liveKernels += specs.size();
  CpuJitKernels kernels;
  for (const std::string &name : names) {
    llvm::Expected<llvm::orc::ExecutorAddr> address = impl_->jit->lookup(name);
    if (!address) {
      absl::Status status = failure(absl::InternalError(
          absl::StrCat("jit: looking up ", name, ": ", errorText(address.takeError()))));
      impl_->removeCode(tracker, specs.size());
      return status;
    }
    kernels.entries.push_back(address->toPtr<KernelFn>());
  }
  // Made last: its destructor takes mu, which this call holds until it returns.
  kernels.code = std::make_shared<CpuJitModule>(impl_, std::move(tracker), specs.size());
  impl_->times.codegen += secondsSince(start);
  impl_->times.diskHits += fromDisk;
  impl_->times.modules += 1;
  impl_->times.kernels += specs.size();
  return kernels;
}

absl::StatusOr<std::string> CpuJit::llvmIR(const KernelSpec &spec, bool optimized) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  llvm::LLVMContext llvmContext;
  absl::StatusOr<std::unique_ptr<llvm::Module>> module =
      impl_->lower({&spec, 1}, {spec.name()}, llvmContext, optimized);
  if (!module.ok())
    return absl::Status(module.status().code(),
                        absl::StrCat(spec.name(), ": ", module.status().message()));
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os, nullptr);
  os.flush();
  return text;
}

absl::StatusOr<std::string> CpuJit::assembly(const KernelSpec &spec) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  llvm::LLVMContext llvmContext;
  absl::StatusOr<std::unique_ptr<llvm::Module>> module =
      impl_->lower({&spec, 1}, {spec.name()}, llvmContext, /*optimize=*/true);
  if (!module.ok())
    return absl::Status(module.status().code(),
                        absl::StrCat(spec.name(), ": ", module.status().message()));
  llvm::SmallString<0> text;
  llvm::raw_svector_ostream os(text);
  llvm::legacy::PassManager passes;
  if (impl_->machine->addPassesToEmitFile(passes, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    return absl::InternalError(absl::StrCat(spec.name(), ": the target cannot emit assembly"));
  passes.run(**module);
  return std::string(text.str());
}

std::string CpuJit::hostDescription() const {
  std::vector<std::string> enabled;
  for (llvm::StringRef f : llvm::split(impl_->features, ','))
    if (f.starts_with("+"))
      enabled.push_back(f.drop_front().str());
  return absl::StrCat(impl_->cpu, " ", absl::StrJoin(enabled, ","));
}

CpuJitTimes CpuJit::times() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  CpuJitTimes times = impl_->times;
  times.diskWrites = impl_->cache->writes();
  times.diskErrors = impl_->cache->errors();
  return times;
}

bool CpuJit::int8Dot() const { return impl_->int8Dot; }

std::string CpuJit::cacheDir() const { return impl_->cache->dir(); }

} // namespace sinter::codegen
