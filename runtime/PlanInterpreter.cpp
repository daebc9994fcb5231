// PlanInterpreter.cpp - one reference-kernel launch per trace entry.
//
// The plan keeps the trace's entries and patches the parameter integers in at each run, so one
// plan serves every token of a decode loop.
#include "runtime/PlanInterpreter.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sinter::runtime {

Plan::~Plan() = default;
PlanCompiler::~PlanCompiler() = default;

namespace {

// `op` with its slot handles replaced by the caller's handles (for messages).
OpCall withCallerHandles(OpCall op, const PlanArgs &args) {
  for (BufferHandle &b : op.buffers)
    if (b.valid() && Trace::slotOf(b) < args.slotHandles.size())
      b = args.slotHandles[Trace::slotOf(b)];
  return op;
}

class InterpreterPlan : public Plan {
public:
  InterpreterPlan(std::vector<TraceEntry> entries, std::vector<IntSlot> params,
                  OpFaultHook faultHook)
      : entries_(std::move(entries)), params_(std::move(params)), faultHook_(std::move(faultHook)) {
  }

  absl::Status run(const PlanArgs &args) override {
    size_t nextParam = 0;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
      const TraceEntry &entry = entries_[i];
      if (entry.kind == TraceEntry::Kind::Upload) {
        const std::vector<uint8_t> &bytes = *args.payloads[entry.payload];
        std::memcpy(args.slotData[entry.uploadSlot], bytes.data(), entry.uploadBytes);
        continue;
      }
      OpCall op = entry.op;
      // params_ is sorted by entry, so the parameters of entry i are the next ones.
      for (; nextParam < params_.size() && params_[nextParam].entry == i; ++nextParam)
        op.ints[params_[nextParam].index] = args.params[nextParam];
      if (faultHook_) {
        absl::Status fault = faultHook_(op);
        if (!fault.ok())
          return absl::Status(fault.code(), absl::StrCat("kernel #", i, " (",
                                                         describeOp(withCallerHandles(op, args)),
                                                         ") failed: ", fault.message()));
      }
      executeReference(op, [&](BufferHandle h) { return args.slotData[Trace::slotOf(h)]; });
    }
    return absl::OkStatus();
  }

  size_t numKernels() const override {
    size_t n = 0;
    for (const TraceEntry &e : entries_)
      n += e.kind == TraceEntry::Kind::Op;
    return n;
  }

  std::string describe() const override {
    std::string s;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
      const TraceEntry &e = entries_[i];
      if (e.kind == TraceEntry::Kind::Op)
        absl::StrAppend(&s, "kernel #", i, ": ", describeOp(e.op), "\n");
      else
        absl::StrAppend(&s, "upload #", i, ": slot ", e.uploadSlot, " ", e.uploadBytes, " bytes\n");
    }
    return s;
  }

private:
  std::vector<TraceEntry> entries_;
  std::vector<IntSlot> params_;
  OpFaultHook faultHook_;
};

} // namespace

absl::StatusOr<std::unique_ptr<Plan>>
InterpreterCompiler::compile(const Trace &trace, const std::vector<IntSlot> &params) {
  return std::unique_ptr<Plan>(new InterpreterPlan(trace.entries, params, faultHook_));
}

} // namespace sinter::runtime
