// SinterDump.cpp - sinter-dump: show what the compiler makes of a workload.
//
// Records a decode workload on the lazy backend (or reads a `.mlir` trace a user handed in),
// runs the fusion pipeline and prints the graph before and after, the kernels with their member
// ops and the patterns that formed them, and optionally a Graphviz picture. It is how a fusion is
// inspected and how a fusion bug is reported.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/CpuCompiler.h"
#include "ir/TraceToIR.h"
#include "passes/FusionCompiler.h"
#include "runtime/LazyBackend.h"
#include "sinter/Status.h"
#include "support/ProgramDot.h"
#include "tools/model/Decoder.h"
#include "tools/model/ModelFile.h"
#include "tools/model/Synthetic.h"

namespace sinter {
namespace {

constexpr const char *kHelp =
    R"(sinter-dump: show the graph Sinter records and the kernels it fuses.

Workload (one of):
  --synthetic PRESET     record a decode of a built-in model (stories260K, tinyllama-1.1b, llama-7b)
  --model PATH           record a decode of a llama2.c or GGUF file
  --trace FILE.mlir      read a trace written by --write-trace (or SINTER_DUMP) instead

Options:
  --dtype NAME           weight format of synthetic models (f32, q4_0, q8_0, ...; default q4_0)
  --steps N              decode N tokens from BOS and show the last token's trace (default 2)
  --disable-fusion LIST  "all" or a comma list of patterns to switch off
  --write-trace FILE     write the recorded trace as .mlir (sinter-opt and --trace read it back)
  --dot PREFIX           write PREFIX.dot (and PREFIX.svg when Graphviz is installed)
  --print-ir             print the IR before and after the pipeline (default: kernels only)
  --llvm-ir              print the LLVM IR the cpu backend compiles for each kernel's members
                         (optimized, for this host; each distinct function once)
  --asm                  the same functions as host assembly (what the JIT emits after O3)
  --all-members          list every member op (default: a kernel that repeats one group of ops,
                         such as attention's per-head score, softmax, value, lists the group once)
  --help                 this text

Output: a summary line (calls, kernels, kernels per layer), then one block per kernel listing
its patterns and member ops. Buffers are trace slots (%N), in order of first use.
)";

struct DumpOptions {
  std::string synthetic, modelPath, tracePath, writeTrace, dotPrefix;
  DType dtype = DType::Q4_0;
  uint32_t steps = 2;
  passes::FusionOptions fusion;
  bool printIR = false;
  bool allMembers = false;
  bool llvmIR = false;
  bool assembly = false;
};

absl::StatusOr<DumpOptions> parse(int argc, char **argv) {
  DumpOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= argc)
        return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      return std::string(argv[++i]);
    };
    if (flag == "--help") {
      std::fputs(kHelp, stdout);
      std::exit(0);
    }
    if (flag == "--print-ir") {
      o.printIR = true;
      continue;
    }
    if (flag == "--llvm-ir") {
      o.llvmIR = true;
      continue;
    }
    if (flag == "--asm") {
      o.assembly = true;
      continue;
    }
    if (flag == "--all-members") {
      o.allMembers = true;
      continue;
    }
    static const char *const kValued[] = {"--synthetic", "--model", "--trace", "--write-trace",
                                          "--dot",       "--dtype", "--steps", "--disable-fusion"};
    if (std::find(std::begin(kValued), std::end(kValued), flag) == std::end(kValued))
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag, " (see --help)"));
    SINTER_ASSIGN_OR_RETURN(std::string v, value());
    if (flag == "--synthetic")
      o.synthetic = v;
    else if (flag == "--model")
      o.modelPath = v;
    else if (flag == "--trace")
      o.tracePath = v;
    else if (flag == "--write-trace")
      o.writeTrace = v;
    else if (flag == "--dot")
      o.dotPrefix = v;
    else if (flag == "--dtype") {
      if (!parseDType(v, &o.dtype))
        return absl::InvalidArgumentError(absl::StrCat("--dtype: unknown format '", v, "'"));
    } else if (flag == "--steps") {
      if (!absl::SimpleAtoi(v, &o.steps) || o.steps == 0)
        return absl::InvalidArgumentError(absl::StrCat("--steps: '", v, "' is not a count > 0"));
    } else if (flag == "--disable-fusion") {
      o.fusion.disabled = absl::StrSplit(v, ',', absl::SkipEmpty());
      const std::vector<std::string> &known = passes::fusionPatternNames();
      for (const std::string &name : o.fusion.disabled)
        if (name != "all" && std::find(known.begin(), known.end(), name) == known.end())
          return absl::InvalidArgumentError(absl::StrCat("--disable-fusion: unknown pattern '",
                                                         name, "'; valid: all, ",
                                                         absl::StrJoin(known, ", ")));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", flag, " (see --help)"));
    }
  }
  int sources = !o.synthetic.empty() + !o.modelPath.empty() + !o.tracePath.empty();
  if (sources != 1)
    return absl::InvalidArgumentError(
        "give exactly one of --synthetic, --model, --trace (see --help)");
  return o;
}

struct Recorded {
  Trace trace;
  std::vector<IntSlot> params;
  uint32_t layers = 0;
};

// Decodes o.steps tokens greedily on the lazy backend and keeps the last flush's trace.
absl::StatusOr<Recorded> record(const DumpOptions &o) {
  model::ModelWeights weights;
  if (!o.synthetic.empty()) {
    model::SyntheticOptions so;
    so.dtype = o.dtype;
    SINTER_ASSIGN_OR_RETURN(weights, model::generatePreset(o.synthetic, so));
  } else {
    SINTER_ASSIGN_OR_RETURN(weights, model::loadModelFile(o.modelPath));
  }
  Recorded out;
  out.layers = weights.config.nLayers;
  runtime::LazyBackendOptions lo;
  lo.onFlush = [&](const Trace &t, absl::Span<const BufferHandle>) {
    if (t.entries.size() > 8) // skip the flushes of the weight upload
      out.trace = t;
  };
  runtime::LazyBackend lazy(std::move(lo));
  SINTER_ASSIGN_OR_RETURN(auto decoder, model::Decoder::create(lazy, weights));
  uint32_t token = 1;
  for (uint32_t pos = 0; pos < o.steps; ++pos) {
    SINTER_ASSIGN_OR_RETURN(std::vector<float> logits, decoder->step(token, pos));
    uint32_t best = 0;
    for (uint32_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[best])
        best = i;
    token = best;
  }
  out.trace.payloads.clear(); // host bytes are not part of what the compiler sees
  out.params = lazy.planParameters(out.trace);
  return out;
}

// One block per kernel: its name, the patterns that formed it and its member ops. Integers that
// are Plan parameters are marked `$N`; with a recorded trace they show this token's value.
// "213 calls -> 27 kernels (5 layers: ...)", the first line of the output and the picture's title.
std::string summary(const KernelProgram &program, size_t calls, uint32_t layers) {
  size_t launches = program.numLaunches();
  std::string s = absl::StrCat(calls, " calls -> ", launches, " kernels");
  if (layers)
    absl::StrAppend(&s, absl::StrFormat(" (%u layers: %.2f kernels per layer, all kernels counted)",
                                        layers, double(launches) / layers));
  return s;
}

void printKernels(const KernelProgram &program, const Trace *recorded, size_t calls,
                  uint32_t layers, bool allMembers) {
  std::printf("%s\n\n", summary(program, calls, layers).c_str());
  size_t n = 0;
  for (const Kernel &k : program.kernels) {
    if (k.hostCopy) {
      std::printf("host copy: %s\n", describeOp(k.ops[0].entry.op).c_str());
      continue;
    }
    std::printf("kernel %zu: %s", n++, k.name.c_str());
    if (!k.patterns.empty())
      std::printf("  [%s]", absl::StrJoin(k.patterns, ", ").c_str());
    std::printf("\n");
    const size_t shown = allMembers ? k.ops.size() : repeatedGroup(k.ops);
    for (size_t j = 0; j < shown; ++j) {
      const KernelMember &m = k.ops[j];
      const std::string params = paramNames(m);
      std::printf("    %s%s\n", describeOp(stepValues(m, recorded)).c_str(),
                  params.empty() ? "" : absl::StrCat("   {params: ", params, "}").c_str());
    }
    if (shown < k.ops.size())
      std::printf("    ... and %zu more repetitions of these %zu ops (other offsets; "
                  "--all-members lists them)\n",
                  k.ops.size() / shown - 1, shown);
  }
}

// The cpu backend's code for every kernel: which JIT function runs each member op (a fused
// quantized_matmul kernel computes its rms_norm prologue and element-wise epilogue members too;
// the rest run their own kernels), then each distinct function once, as optimized LLVM IR or
// (`assembly`) as host assembly.
absl::Status printCpuCode(const KernelProgram &program, bool assembly) {
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<codegen::CpuCompiler> cpu,
                          codegen::CpuCompiler::create());
  std::printf("\n// ===== %s of the cpu backend (host: %s) =====\n",
              assembly ? "Assembly" : "LLVM IR", cpu->hostDescription().c_str());
  std::vector<codegen::CpuKernelFunctions> functions = cpu->functionsOf(program);
  std::set<std::string> printed;
  std::vector<std::string> bodies;
  size_t n = 0;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel &kernel = program.kernels[k];
    if (kernel.hostCopy)
      continue;
    std::printf("// kernel %zu: %s\n", n++, kernel.name.c_str());
    for (size_t i = 0; i < kernel.ops.size(); ++i) {
      int f = functions[k].memberFunction[i];
      if (f < 0)
        continue;
      const codegen::KernelSpec &spec = functions[k].specs[f];
      std::string name = spec.name();
      std::printf("//   %s -> @%s\n", opInfo(kernel.ops[i].entry.op.kind).name, name.c_str());
      if (!printed.insert(spec.key()).second)
        continue;
      SINTER_ASSIGN_OR_RETURN(std::string body,
                              assembly ? cpu->specAsm(spec) : cpu->specIR(spec, true));
      bodies.push_back(std::move(body));
    }
  }
  for (const std::string &body : bodies)
    std::printf("\n%s", body.c_str());
  return absl::OkStatus();
}

absl::Status run(const DumpOptions &o) {
  passes::CompileDump dump;
  KernelProgram program;
  Recorded rec;
  bool haveTrace = false;
  size_t calls = 0;
  uint32_t layers = 0;
  if (!o.tracePath.empty()) {
    std::ifstream in(o.tracePath);
    if (!in)
      return absl::NotFoundError(absl::StrCat("cannot read ", o.tracePath));
    std::stringstream text;
    text << in.rdbuf();
    SINTER_ASSIGN_OR_RETURN(program, passes::compileMlirText(text.str(), o.fusion, &dump));
    calls = dump.opsBefore;
  } else {
    SINTER_ASSIGN_OR_RETURN(rec, record(o));
    haveTrace = true;
    calls = rec.trace.entries.size();
    layers = rec.layers;
    if (!o.writeTrace.empty()) {
      SINTER_ASSIGN_OR_RETURN(std::string text, ir::traceToMlirText(rec.trace, rec.params));
      std::ofstream(o.writeTrace) << text;
    }
    SINTER_ASSIGN_OR_RETURN(program,
                            passes::compileTraceOnce(rec.trace, rec.params, o.fusion, &dump));
  }
  if (o.printIR)
    std::printf("// ===== trace as recorded =====\n%s\n// ===== after the pipeline =====\n%s\n",
                dump.before.c_str(), dump.after.c_str());
  printKernels(program, haveTrace ? &rec.trace : nullptr, calls, layers, o.allMembers);
  if (o.llvmIR)
    SINTER_RETURN_IF_ERROR(printCpuCode(program, /*assembly=*/false));
  if (o.assembly)
    SINTER_RETURN_IF_ERROR(printCpuCode(program, /*assembly=*/true));
  if (!o.dotPrefix.empty())
    writeDotAndSvg(
        program, o.dotPrefix,
        DotOptions{haveTrace ? &rec.trace : nullptr, layers, summary(program, calls, layers)});
  return absl::OkStatus();
}

} // namespace
} // namespace sinter

int main(int argc, char **argv) {
  absl::StatusOr<sinter::DumpOptions> options = sinter::parse(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "sinter-dump: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  absl::Status status = sinter::run(*options);
  if (!status.ok()) {
    std::fprintf(stderr, "sinter-dump: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
