// FusionCheck.cpp - the SINTER_CHECK_FUSION plan and the test hook that breaks a fused kernel.
#include "passes/FusionCheck.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string_view>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sinter/Status.h"
#include "support/Ops.h"

namespace sinter::passes {
namespace {

// How one buffer's fused bytes compare with the unfused ones.
struct SlotDiff {
  uint32_t slot = 0;
  int lastWriter = -1; // kernel index in the fused program
  double nmse = 0;
  size_t maxAbsAt = 0, maxRelAt = 0;
  double maxAbs = 0, maxRel = 0;
  float fusedAbs = 0, unfusedAbs = 0, fusedRel = 0, unfusedRel = 0;
  int64_t nanAt = -1;      // first element where exactly one side is NaN (or they differ as NaNs)
  int64_t tailByteAt = -1; // first differing byte after the last whole f32
  bool fails = false;
};

SlotDiff compareSlot(uint32_t slot, const uint8_t *fused, const uint8_t *unfused, uint64_t bytes,
                     double tolerance) {
  SlotDiff d;
  d.slot = slot;
  const uint64_t n = bytes / 4;
  double num = 0, den = 0;
  for (uint64_t i = 0; i < n; ++i) {
    float f, u;
    std::memcpy(&f, fused + 4 * i, 4);
    std::memcpy(&u, unfused + 4 * i, 4);
    if (std::isnan(f) || std::isnan(u)) {
      if (d.nanAt < 0 && std::memcmp(fused + 4 * i, unfused + 4 * i, 4) != 0)
        d.nanAt = int64_t(i);
      continue;
    }
    const double diff = std::fabs(double(f) - double(u));
    num += diff * diff;
    den += double(u) * double(u);
    if (diff > d.maxAbs || (std::isinf(diff) && !std::isinf(d.maxAbs))) {
      d.maxAbs = diff;
      d.maxAbsAt = i;
      d.fusedAbs = f;
      d.unfusedAbs = u;
    }
    if (u != 0 && diff / std::fabs(double(u)) > d.maxRel) {
      d.maxRel = diff / std::fabs(double(u));
      d.maxRelAt = i;
      d.fusedRel = f;
      d.unfusedRel = u;
    }
  }
  for (uint64_t b = 4 * n; b < bytes && d.tailByteAt < 0; ++b)
    if (fused[b] != unfused[b])
      d.tailByteAt = int64_t(b);
  d.nmse = den > 0 ? num / den : (n ? num / double(n) : 0.0);
  d.fails = d.nanAt >= 0 || d.tailByteAt >= 0 || !(d.nmse <= tolerance);
  return d;
}

std::string describeDiff(const SlotDiff &d, double tolerance) {
  std::string s = absl::StrFormat("nmse %.3g (tolerance %.0e)", d.nmse, tolerance);
  if (d.nanAt >= 0)
    absl::StrAppend(&s, ", NaN on one side at element ", d.nanAt);
  if (d.tailByteAt >= 0)
    absl::StrAppend(&s, ", trailing byte ", d.tailByteAt, " differs");
  absl::StrAppend(&s,
                  absl::StrFormat("; largest absolute difference %.6g at element %d (fused %.9g, "
                                  "unfused %.9g); largest relative difference %.3g at element %d "
                                  "(fused %.9g, unfused %.9g)",
                                  d.maxAbs, d.maxAbsAt, d.fusedAbs, d.unfusedAbs, d.maxRel,
                                  d.maxRelAt, d.fusedRel, d.unfusedRel));
  return s;
}

// Launch numbers as sinter-dump prints them: kernels counted, host copies not.
std::vector<int> launchNumbers(const KernelProgram &program) {
  std::vector<int> numbers(program.kernels.size(), -1);
  int n = 0;
  for (size_t k = 0; k < program.kernels.size(); ++k)
    if (!program.kernels[k].hostCopy)
      numbers[k] = n++;
  return numbers;
}

std::string kernelTitle(const KernelProgram &program, int k) {
  if (k < 0)
    return "no kernel";
  const Kernel &kernel = program.kernels[k];
  std::string title = kernel.hostCopy ? std::string("host copy")
                                      : absl::StrCat("kernel ", launchNumbers(program)[k]);
  absl::StrAppend(&title, " (", kernel.name);
  if (!kernel.patterns.empty())
    absl::StrAppend(&title, " [", absl::StrJoin(kernel.patterns, ", "), "]");
  absl::StrAppend(&title, ")");
  return title;
}

bool quantizesActivations(const KernelProgram &program) {
  for (const Kernel &k : program.kernels)
    for (const KernelMember &m : k.ops)
      if (m.entry.kind == TraceEntry::Kind::Op && m.entry.op.kind == OpKind::QuantizedMatmul &&
          dtypeInfo(m.entry.op.dtype).blockSize > 1)
        return true;
  return false;
}

std::string reportPath() {
  static std::atomic<int> reports{0};
  const char *dir = std::getenv("TMPDIR");
  return absl::StrFormat("%s/sinter-check-fusion-%d-%d.txt", dir && *dir ? dir : "/tmp",
                         int(getpid()), reports++);
}

class CheckingPlan : public Plan {
public:
  CheckingPlan(std::unique_ptr<Plan> fused, KernelProgram fusedProgram, const Trace &trace,
               const std::vector<IntSlot> &params, std::string dumpPrefix)
      : fused_(std::move(fused)), fusedProgram_(std::move(fusedProgram)),
        unfusedProgram_(unfusedProgram(trace, params)), buffers_(trace.buffers),
        lastWriter_(trace.buffers.size(), -1), dumpPrefix_(std::move(dumpPrefix)),
        tolerance_(quantizesActivations(fusedProgram_) ? kCheckQuantizedTolerance
                                                       : kCheckF32Tolerance) {
    unfused_ = makeInterpreterPlan(unfusedProgram_);
    for (size_t k = 0; k < fusedProgram_.kernels.size(); ++k)
      for (const KernelMember &m : fusedProgram_.kernels[k].ops) {
        if (m.entry.kind == TraceEntry::Kind::Upload) {
          lastWriter_[m.entry.uploadSlot] = int(k);
          continue;
        }
        absl::StatusOr<AccessList> accesses = opAccesses(m.entry.op);
        if (!accesses.ok())
          continue;
        for (const BufferAccess &a : *accesses)
          if (a.write)
            lastWriter_[Trace::slotOf(m.entry.op.buffers[a.bufferIndex])] = int(k);
      }
  }

  absl::Status run(const PlanArgs &args) override {
    const size_t n = buffers_.size();
    const bool onDevice = !args.slotDevice.empty();
    if (onDevice && !args.readSlot)
      return absl::UnimplementedError(
          "SINTER_CHECK_FUSION: the buffers are in device memory and the caller gave no way to "
          "read them (PlanArgs::readSlot)");
    // The unfused program runs on a host copy of every slot, taken before the fused plan runs.
    std::vector<std::vector<uint8_t>> copies(n);
    std::vector<uint8_t *> copyData(n);
    for (size_t i = 0; i < n; ++i) {
      copies[i].resize(buffers_[i].sizeBytes);
      copyData[i] = copies[i].data();
      if (onDevice)
        SINTER_RETURN_IF_ERROR(args.readSlot(uint32_t(i), absl::MakeSpan(copies[i])));
      else
        std::memcpy(copyData[i], args.slotData[i], buffers_[i].sizeBytes);
    }
    PlanArgs unfusedArgs;
    unfusedArgs.slotData = copyData;
    unfusedArgs.params = args.params;
    unfusedArgs.payloads = args.payloads;
    unfusedArgs.slotHandles = args.slotHandles;
    SINTER_RETURN_IF_ERROR(unfused_->run(unfusedArgs));
    PlanArgs fusedArgs = args;
    fusedArgs.mayFinishLater = false; // the results are read right after
    SINTER_RETURN_IF_ERROR(fused_->run(fusedArgs));

    std::vector<SlotDiff> failures;
    std::vector<uint8_t> deviceBytes;
    for (size_t i = 0; i < n; ++i) {
      if (!buffers_[i].observable || lastWriter_[i] < 0)
        continue;
      const uint8_t *fusedBytes = onDevice ? nullptr : args.slotData[i];
      if (onDevice) {
        deviceBytes.resize(buffers_[i].sizeBytes);
        SINTER_RETURN_IF_ERROR(args.readSlot(uint32_t(i), absl::MakeSpan(deviceBytes)));
        fusedBytes = deviceBytes.data();
      }
      if (std::memcmp(fusedBytes, copyData[i], buffers_[i].sizeBytes) == 0)
        continue;
      SlotDiff d =
          compareSlot(uint32_t(i), fusedBytes, copyData[i], buffers_[i].sizeBytes, tolerance_);
      d.lastWriter = lastWriter_[i];
      if (d.fails)
        failures.push_back(d);
    }
    if (failures.empty())
      return absl::OkStatus();
    // The first launch whose output is wrong: the failing buffer written last earliest.
    std::stable_sort(failures.begin(), failures.end(), [](const SlotDiff &a, const SlotDiff &b) {
      return a.lastWriter < b.lastWriter;
    });
    return report(failures, args);
  }

  size_t numKernels() const override { return fused_->numKernels(); }
  std::string describe() const override { return fused_->describe(); }

private:
  std::string bufferName(uint32_t slot, const PlanArgs &args) const {
    std::string s = absl::StrCat("%", slot + 1, " (", buffers_[slot].sizeBytes, " bytes");
    if (slot < args.slotHandles.size())
      absl::StrAppend(&s, ", the caller's buffer ", args.slotHandles[slot].id);
    return s + ")";
  }

  absl::Status report(const std::vector<SlotDiff> &failures, const PlanArgs &args) const {
    const SlotDiff &first = failures.front();
    std::string headline =
        absl::StrCat("SINTER_CHECK_FUSION: fused and unfused results differ: ",
                     kernelTitle(fusedProgram_, first.lastWriter), " last wrote ",
                     bufferName(first.slot, args), "\n  ", describeDiff(first, tolerance_));
    std::string text = absl::StrCat(headline, "\n\n");
    if (!dumpPrefix_.empty())
      absl::StrAppend(&text, "trace: ", dumpPrefix_, "-trace.mlir (SINTER_DUMP)\n\n");
    absl::StrAppend(&text, "Every buffer that differs, by the launch that last wrote it:\n");
    for (const SlotDiff &d : failures)
      absl::StrAppend(&text, "  ", bufferName(d.slot, args), " last written by ",
                      kernelTitle(fusedProgram_, d.lastWriter), ": ", describeDiff(d, tolerance_),
                      "\n");
    absl::StrAppend(&text, "\nfused program:\n", fusedProgram_.describe(args.params),
                    "\nunfused program:\n", unfusedProgram_.describe(args.params));
    const std::string path = reportPath();
    std::ofstream out(path);
    out << text;
    out.close();
    std::string where = out ? absl::StrCat("both programs and every differing buffer are in ", path)
                            : absl::StrCat("(could not write the details to ", path, ")");
    std::string more = failures.size() > 1
                           ? absl::StrCat("; ", failures.size() - 1, " more buffers differ")
                           : std::string();
    if (!dumpPrefix_.empty())
      absl::StrAppend(&more, "; trace ", dumpPrefix_, "-trace.mlir");
    return absl::InternalError(absl::StrCat(headline, more, "\n  ", where));
  }

  std::unique_ptr<Plan> fused_, unfused_;
  KernelProgram fusedProgram_;
  KernelProgram unfusedProgram_;
  std::vector<TraceBuffer> buffers_;
  std::vector<int> lastWriter_; // slot -> fused kernel index, -1: never written
  std::string dumpPrefix_;
  double tolerance_;
};

} // namespace

bool checkFusionRequested() {
  const char *s = std::getenv("SINTER_CHECK_FUSION");
  return s && *s && std::string_view(s) != "0";
}

std::unique_ptr<Plan> makeCheckingPlan(std::unique_ptr<Plan> fused, KernelProgram fusedProgram,
                                       const Trace &trace, const std::vector<IntSlot> &params,
                                       std::string dumpPrefix) {
  return std::make_unique<CheckingPlan>(std::move(fused), std::move(fusedProgram), trace, params,
                                        std::move(dumpPrefix));
}

int breakOneFusedKernel(KernelProgram &program) {
  const std::vector<int> numbers = launchNumbers(program);
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    Kernel &kernel = program.kernels[k];
    if (kernel.hostCopy || kernel.ops.size() < 2)
      continue;
    for (KernelMember &m : kernel.ops) {
      if (m.entry.kind != TraceEntry::Kind::Op)
        continue;
      if (m.entry.op.kind == OpKind::RmsNorm) {
        m.entry.op.scalar = 1.0f;
        return numbers[k];
      }
      if (m.entry.op.kind == OpKind::Rope) {
        m.entry.op.scalar = 2.0f;
        return numbers[k];
      }
    }
  }
  return -1;
}

} // namespace sinter::passes
