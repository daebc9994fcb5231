// KernelProgram.cpp - the unfused program of a trace, and the interpreter plan of any program.
//
// The interpreter is the oracle for fused plans: it runs every member op of every kernel with
// the reference kernels, in order, so a fused program and the unfused one must give the same
// bytes unless a pass changed what the program computes.
#include "support/KernelProgram.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sinter {

size_t KernelProgram::numLaunches() const {
  size_t n = 0;
  for (const Kernel &k : kernels)
    n += !k.hostCopy;
  return n;
}

namespace {

std::string describeEntry(const TraceEntry &e) {
  if (e.kind == TraceEntry::Kind::Upload)
    return absl::StrCat("upload(%", e.uploadSlot + 1, ", ", e.uploadBytes, " bytes)");
  return describeOp(e.op);
}

class InterpreterPlan : public Plan {
public:
  InterpreterPlan(KernelProgram program, OpFaultHook faultHook)
      : program_(std::move(program)), faultHook_(std::move(faultHook)) {}

  absl::Status run(const PlanArgs &args) override {
    size_t launch = 0; // sinter-dump's kernel number: host copies are not counted
    for (size_t k = 0; k < program_.kernels.size(); ++k) {
      const Kernel &kernel = program_.kernels[k];
      launch += k > 0 && !program_.kernels[k - 1].hostCopy;
      for (const KernelMember &member : kernel.ops) {
        const TraceEntry &entry = member.entry;
        if (entry.kind == TraceEntry::Kind::Upload) {
          const std::vector<uint8_t> &bytes = *args.payloads[entry.payload];
          std::memcpy(args.slotData[entry.uploadSlot], bytes.data(), entry.uploadBytes);
          continue;
        }
        OpCall op = boundOp(member, args.params);
        if (faultHook_) {
          absl::Status fault = faultHook_(op);
          if (!fault.ok())
            return absl::Status(fault.code(),
                                absl::StrCat("kernel ", launch, " '", kernel.name, "' (",
                                             describeOp(op), ") failed: ", fault.message()));
        }
        executeReference(op, [&](BufferHandle h) { return args.slotData[Trace::slotOf(h)]; });
      }
    }
    return absl::OkStatus();
  }

  size_t numKernels() const override { return program_.numLaunches(); }
  std::string describe() const override { return program_.describe(); }

private:
  KernelProgram program_;
  OpFaultHook faultHook_;
};

} // namespace

std::vector<uint64_t> paramValues(const Trace &trace, const std::vector<IntSlot> &params) {
  std::vector<uint64_t> values;
  values.reserve(params.size());
  for (const IntSlot &p : params)
    values.push_back(p.entry < trace.entries.size() ? trace.entries[p.entry].op.ints[p.index] : 0);
  return values;
}

std::string KernelProgram::describe(absl::Span<const uint64_t> params) const {
  std::string s;
  size_t launch = 0; // numbered as sinter-dump numbers them: host copies are not launches
  for (const Kernel &kernel : kernels) {
    if (kernel.hostCopy)
      absl::StrAppend(&s, "host copy ", kernel.name);
    else
      absl::StrAppend(&s, "kernel ", launch++, " ", kernel.name);
    if (!kernel.patterns.empty())
      absl::StrAppend(&s, " [", absl::StrJoin(kernel.patterns, ", "), "]");
    absl::StrAppend(&s, ":");
    for (const KernelMember &op : kernel.ops) {
      if (params.size() == numParams && op.entry.kind == TraceEntry::Kind::Op && numParams > 0) {
        absl::StrAppend(&s, " ", describeOp(boundOp(op, params)), ";");
        continue;
      }
      absl::StrAppend(&s, " ", describeEntry(op.entry), ";");
    }
    absl::StrAppend(&s, "\n");
  }
  return s;
}

OpCall boundOp(const KernelMember &op, absl::Span<const uint64_t> params) {
  OpCall call = op.entry.op;
  for (int i = 0; i < 5; ++i)
    if (op.paramOf[i] >= 0)
      call.ints[i] = params[op.paramOf[i]];
  return call;
}

KernelProgram unfusedProgram(const Trace &trace, const std::vector<IntSlot> &params) {
  KernelProgram program;
  program.numParams = params.size();
  program.kernels.reserve(trace.entries.size());
  size_t nextParam = 0;
  for (uint32_t i = 0; i < trace.entries.size(); ++i) {
    const TraceEntry &entry = trace.entries[i];
    Kernel kernel;
    kernel.hostCopy = entry.kind == TraceEntry::Kind::Upload;
    kernel.name = kernel.hostCopy ? "upload" : opInfo(entry.op.kind).name;
    KernelMember op;
    op.entry = entry;
    op.traceEntry = i;
    // params are sorted by entry, so the parameters of entry i are the next ones.
    for (; nextParam < params.size() && params[nextParam].entry == i; ++nextParam)
      op.paramOf[params[nextParam].index] = int32_t(nextParam);
    kernel.ops.push_back(op);
    program.kernels.push_back(std::move(kernel));
  }
  return program;
}

std::unique_ptr<Plan> makeInterpreterPlan(KernelProgram program, OpFaultHook faultHook) {
  return std::make_unique<InterpreterPlan>(std::move(program), std::move(faultHook));
}

} // namespace sinter
