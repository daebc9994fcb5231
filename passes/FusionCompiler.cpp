// FusionCompiler.cpp - one compilation: build the trace module, run the pipeline, extract.
//
// Only runs on plan-cache misses. With SINTER_DUMP=dir every compilation also writes its IR
// before and after the pipeline, the kernel list and a Graphviz picture into `dir`.
#include "passes/FusionCompiler.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir/Registration.h"
#include "ir/SinterDialect.h"
#include "ir/TraceToModule.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "passes/ExtractProgram.h"
#include "passes/FusionCheck.h"
#include "passes/Pipeline.h"
#include "runtime/FaultInjection.h"
#include "sinter/Status.h"
#include "support/ProgramDot.h"
#include "llvm/Support/raw_ostream.h"

namespace sinter::passes {
namespace {

std::string printModule(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  out << text;
  if (!out)
    std::fprintf(stderr, "sinter: SINTER_DUMP could not write %s\n", path.c_str());
}

// Runs the default pipeline on `module`, recording the IR before and after in `dump`.
absl::Status runPipeline(mlir::ModuleOp module, const FusionOptions &options, CompileDump *dump,
                         bool dumpEachPass) {
  mlir::MLIRContext &context = *module.getContext();
  if (dump) {
    dump->before = printModule(module);
    dump->opsBefore = 0;
    module.walk([&](mlir::Operation *op) {
      if (ir::graphOpKind(op) || mlir::isa<ir::UploadOp>(op))
        ++dump->opsBefore;
    });
  }
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d.getLocation() << ": " << d << "\n";
    return mlir::success();
  });
  mlir::PassManager pm(&context);
  buildPipeline(pm, options);
  if (dump && dumpEachPass) {
    context.disableMultithreading();
    pm.enableIRPrinting(
        [](mlir::Pass *, mlir::Operation *) { return false; },
        [](mlir::Pass *, mlir::Operation *) { return true; }, /*printModuleScope=*/true,
        /*printAfterOnlyOnChange=*/false, /*printAfterOnlyOnFailure=*/false, llvm::errs());
  }
  if (mlir::failed(pm.run(module)))
    return absl::InternalError(absl::StrCat("the fusion pipeline failed: ", diagnostics));
  if (dump)
    dump->after = printModule(module);
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<KernelProgram> compileProgram(mlir::MLIRContext &context, const Trace &trace,
                                             const std::vector<IntSlot> &params,
                                             const FusionOptions &options, CompileDump *dump,
                                             bool dumpEachPass) {
  SINTER_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module,
                          ir::buildTraceModule(context, trace, params));
  SINTER_RETURN_IF_ERROR(runPipeline(*module, options, dump, dumpEachPass));
  return extractProgram(*module, trace, params);
}

absl::StatusOr<KernelProgram> compileTraceOnce(const Trace &trace,
                                               const std::vector<IntSlot> &params,
                                               const FusionOptions &options, CompileDump *dump) {
  std::unique_ptr<mlir::MLIRContext> context = ir::makeSinterContext();
  return compileProgram(*context, trace, params, options, dump);
}

absl::StatusOr<KernelProgram> compileMlirText(const std::string &text, const FusionOptions &options,
                                              CompileDump *dump) {
  std::unique_ptr<mlir::MLIRContext> context = ir::makeSinterContext();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(context.get(), [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d.getLocation() << ": " << d << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, context.get());
  if (!module)
    return absl::InvalidArgumentError(absl::StrCat("cannot parse the trace: ", diagnostics));
  auto func = module->lookupSymbol<mlir::func::FuncOp>("trace");
  if (!func)
    return absl::InvalidArgumentError("the module has no func.func @trace");
  // What extraction needs from a Trace: the parameters' IntSlots and the payload count.
  Trace trace;
  std::vector<IntSlot> params;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto tag = func.getArgAttrOfType<mlir::DenseI64ArrayAttr>(i, ir::kParamAttrName);
        tag && tag.size() == 2)
      params.push_back({uint32_t(tag[0]), uint8_t(tag[1])});
  func.walk([&](ir::UploadOp upload) {
    trace.payloads.resize(std::max<size_t>(trace.payloads.size(), upload.getPayload() + 1));
  });
  SINTER_RETURN_IF_ERROR(runPipeline(*module, options, dump, /*dumpEachPass=*/false));
  return extractProgram(*module, trace, params);
}

FusionCompiler::FusionCompiler(FusionOptions options, PlanMaker makePlan, std::string name)
    : options_(std::move(options)), makePlan_(std::move(makePlan)), name_(std::move(name)),
      context_(ir::makeSinterContext()) {
  if (const char *dir = std::getenv("SINTER_DUMP"); dir && *dir) {
    dumpDir_ = dir;
    std::error_code error;
    std::filesystem::create_directories(dumpDir_, error);
    if (error)
      std::fprintf(stderr, "sinter: SINTER_DUMP=%s: cannot create the folder: %s\n", dir,
                   error.message().c_str());
  }
  if (!makePlan_)
    makePlan_ = [](KernelProgram program) -> absl::StatusOr<std::unique_ptr<Plan>> {
      return makeInterpreterPlan(std::move(program));
    };
}

FusionCompiler::~FusionCompiler() = default;

absl::StatusOr<std::unique_ptr<Plan>> FusionCompiler::compile(const Trace &trace,
                                                              const std::vector<IntSlot> &params) {
  if (contextCompiles_++ == kCompilesPerContext) {
    context_.reset(); // nothing of a compilation outlives it: the program is plain C++
    context_ = ir::makeSinterContext();
    contextCompiles_ = 1;
  }
  CompileDump dump;
  bool dumping = !dumpDir_.empty();
  SINTER_ASSIGN_OR_RETURN(KernelProgram program, compileProgram(*context_, trace, params, options_,
                                                                dumping ? &dump : nullptr));
  // Tests only (SINTER_CHECK_FUSION's): a fused kernel that computes something else.
  if (runtime::fault::fires(runtime::fault::Site::WrongResult))
    (void)breakOneFusedKernel(program);
  std::string prefix;
  if (dumping) {
    // Numbered across the process, so several backends never overwrite each other's files.
    static std::atomic<int> dumps{0};
    prefix = absl::StrFormat("%s/plan%03d", dumpDir_, dumps++);
    writeFile(prefix + "-trace.mlir", dump.before);
    writeFile(prefix + "-fused.mlir", dump.after);
    writeFile(prefix + "-kernels.txt", program.describe(paramValues(trace, params)));
    writeDotAndSvg(program, prefix + "-graph", DotOptions{&trace});
  }
  ++compiles_;
  if (!checkFusionRequested())
    return makePlan_(std::move(program));
  KernelProgram copy = program;
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<Plan> fused, makePlan_(std::move(program)));
  return makeCheckingPlan(std::move(fused), std::move(copy), trace, params, prefix);
}

} // namespace sinter::passes
