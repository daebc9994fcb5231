// CpuJit.cpp - MLIR module -> LLVM dialect -> LLVM IR -> O3 -> ORC LLJIT.
//
// One MLIRContext and one LLJIT per CpuJit. MLIR diagnostics and LLVM errors are captured into
// the returned Status (the JIT session's own error reporter is silenced for the same reason), so
// a kernel that fails to compile never aborts the process and never prints half a message.
#include "codegen/llvm/CpuJit.h"

#include <chrono>
#include <mutex>

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
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
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

} // namespace

struct CpuJit::Impl {
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<llvm::TargetMachine> machine;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::string cpu;
  std::string features;
  std::mutex mu;
  uint64_t nextId = 0;
  CpuJitTimes times;

  // Builds `specs` as functions `names` and lowers them to an optimized LLVM module.
  absl::StatusOr<std::unique_ptr<llvm::Module>> lower(absl::Span<const KernelSpec> specs,
                                                      const std::vector<std::string> &names,
                                                      llvm::LLVMContext &llvmContext,
                                                      bool optimize);
  void optimizeModule(llvm::Module &module);
};

absl::StatusOr<std::unique_ptr<llvm::Module>>
CpuJit::Impl::lower(absl::Span<const KernelSpec> specs, const std::vector<std::string> &names,
                    llvm::LLVMContext &llvmContext, bool optimize) {
  auto start = Clock::now();
  DiagnosticCapture diagnostics(*context);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(context.get()));
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::Status built = cpu::buildKernel(*module, specs[i], names[i]);
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
  vectorOptions.reassociateFPReductions = true;
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

CpuJit::CpuJit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuJit::~CpuJit() = default;

absl::StatusOr<std::unique_ptr<CpuJit>> CpuJit::create() {
  static std::once_flag once;
  static bool nativeOk = false;
  std::call_once(once, [] {
    nativeOk = !llvm::InitializeNativeTarget() && !llvm::InitializeNativeTargetAsmPrinter();
  });
  if (!nativeOk)
    return absl::InternalError("cpu jit: llvm has no native target for this host");

  auto impl = std::make_unique<Impl>();
  llvm::Expected<llvm::orc::JITTargetMachineBuilder> builder =
      llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder)
    return absl::InternalError(
        absl::StrCat("cpu jit: detecting the host: ", errorText(builder.takeError())));
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  impl->cpu = builder->getCPU();
  impl->features = builder->getFeatures().getString();
  llvm::Expected<std::unique_ptr<llvm::TargetMachine>> machine = builder->createTargetMachine();
  if (!machine)
    return absl::InternalError(
        absl::StrCat("cpu jit: target machine: ", errorText(machine.takeError())));
  impl->machine = std::move(*machine);

  llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> jit =
      llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*builder)).create();
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

  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::LLVM::LLVMDialect, mlir::math::MathDialect, mlir::scf::SCFDialect,
                  mlir::vector::VectorDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  impl->context =
      std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  impl->context->loadAllAvailableDialects();
  return std::unique_ptr<CpuJit>(new CpuJit(std::move(impl)));
}

absl::StatusOr<std::vector<KernelFn>> CpuJit::compile(absl::Span<const KernelSpec> specs) {
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
      impl_->lower(specs, names, *llvmContext, /*optimize=*/true);
  if (!module.ok())
    return failure(module.status());

  auto start = Clock::now();
  llvm::orc::ThreadSafeModule threadSafe(std::move(*module), std::move(llvmContext));
  if (llvm::Error error = impl_->jit->addIRModule(std::move(threadSafe)))
    return failure(absl::InternalError(absl::StrCat("jit: ", errorText(std::move(error)))));
  std::vector<KernelFn> entries;
  for (const std::string &name : names) {
    llvm::Expected<llvm::orc::ExecutorAddr> address = impl_->jit->lookup(name);
    if (!address)
      return failure(absl::InternalError(
          absl::StrCat("jit: looking up ", name, ": ", errorText(address.takeError()))));
    entries.push_back(address->toPtr<KernelFn>());
  }
  impl_->times.codegen += secondsSince(start);
  impl_->times.modules += 1;
  impl_->times.kernels += specs.size();
  return entries;
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

std::string CpuJit::hostDescription() const {
  std::vector<std::string> enabled;
  for (llvm::StringRef f : llvm::split(impl_->features, ','))
    if (f.starts_with("+"))
      enabled.push_back(f.drop_front().str());
  return absl::StrCat(impl_->cpu, " ", absl::StrJoin(enabled, ","));
}

CpuJitTimes CpuJit::times() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->times;
}

} // namespace sinter::codegen
