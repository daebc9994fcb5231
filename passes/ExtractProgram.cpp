// ExtractProgram.cpp - from the fused module back to slots, constants and parameters.
//
// Every buffer version lives in its buffer's slot (in-place storage), so an operand's slot is
// found by following written operands back to a function argument (KernelUtils' slotOf). An
// integer operand is an arith.constant or a function argument tagged with its IntSlot.
#include "passes/ExtractProgram.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "passes/KernelUtils.h"
#include "sinter/Status.h"

namespace sinter::passes {
namespace {

class Extractor {
public:
  Extractor(mlir::func::FuncOp func, const std::vector<IntSlot> &params) : func_(func) {
    for (size_t i = 0; i < params.size(); ++i)
      paramNumber_[{params[i].entry, params[i].index}] = int32_t(i);
  }

  absl::StatusOr<sinter::KernelMember> memberOp(mlir::Operation *op);

private:
  // The function argument a value comes from through kernel block arguments, or null.
  mlir::BlockArgument functionArgument(mlir::Value v) {
    while (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) {
      auto kernel = mlir::dyn_cast<sinter::ir::KernelOp>(arg.getOwner()->getParentOp());
      if (!kernel)
        return arg;
      v = kernel.getInputs()[arg.getArgNumber()];
    }
    return nullptr;
  }
  absl::Status integer(mlir::Value v, sinter::KernelMember &out, int index);

  mlir::func::FuncOp func_;
  std::map<std::pair<int64_t, int64_t>, int32_t> paramNumber_;
};

absl::Status Extractor::integer(mlir::Value v, sinter::KernelMember &out, int index) {
  llvm::APInt value;
  if (mlir::matchPattern(v, mlir::m_ConstantInt(&value))) {
    out.entry.op.ints[index] = value.getZExtValue();
    return absl::OkStatus();
  }
  mlir::BlockArgument arg = functionArgument(v);
  auto tag =
      arg ? func_.getArgAttrOfType<mlir::DenseI64ArrayAttr>(arg.getArgNumber(), kParamAttrName)
          : nullptr;
  if (!tag || tag.size() != 2)
    return absl::InternalError("an integer operand is neither a constant nor a parameter");
  auto it = paramNumber_.find({tag[0], tag[1]});
  if (it == paramNumber_.end())
    return absl::InternalError("a parameter argument names no IntSlot of the plan");
  out.paramOf[index] = it->second;
  out.traceEntry = uint32_t(tag[0]); // the entry whose integer the parameter is
  return absl::OkStatus();
}

absl::StatusOr<sinter::KernelMember> Extractor::memberOp(mlir::Operation *op) {
  sinter::KernelMember member;
  if (auto upload = mlir::dyn_cast<UploadOp>(op)) {
    member.entry.kind = TraceEntry::Kind::Upload;
    std::optional<int64_t> slot = slotOf(upload.getDst());
    if (!slot)
      return absl::InternalError("upload into a buffer of no slot");
    member.entry.uploadSlot = uint32_t(*slot);
    member.entry.payload = uint32_t(upload.getPayload());
    llvm::APInt size;
    if (!mlir::matchPattern(upload.getSize(), mlir::m_ConstantInt(&size)))
      return absl::UnimplementedError("upload with a parameter size");
    member.entry.uploadBytes = size.getZExtValue();
    return member;
  }
  std::optional<OpKind> kind = graphOpKind(op);
  if (!kind)
    return absl::UnimplementedError(
        absl::StrCat("the executors cannot run ", op->getName().getStringRef().str(), " yet"));
  const OpInfo &info = opInfo(*kind);
  OpCall &call = member.entry.op;
  call.kind = *kind;
  for (unsigned i = 0; i < info.numBuffers; ++i) {
    std::optional<int64_t> slot = slotOf(op->getOperand(i));
    if (!slot)
      return absl::InternalError(absl::StrCat(info.name, ": operand ", i, " has no slot"));
    call.buffers[i] = Trace::handleOfSlot(uint32_t(*slot));
  }
  for (unsigned i = 0; i < info.numInts; ++i)
    SINTER_RETURN_IF_ERROR(integer(op->getOperand(info.numBuffers + i), member, int(i)));
  readAttributes(op, call);
  return member;
}

} // namespace

absl::StatusOr<KernelProgram> extractProgram(mlir::ModuleOp module, const Trace &trace,
                                             const std::vector<IntSlot> &params) {
  auto func = module.lookupSymbol<mlir::func::FuncOp>("trace");
  if (!func)
    return absl::InternalError("the module has no @trace function");
  Extractor extractor(func, params);
  KernelProgram program;
  program.numParams = params.size();
  for (mlir::Operation &op : func.getBody().front()) {
    if (mlir::isa<mlir::arith::ConstantOp, mlir::func::ReturnOp>(op))
      continue;
    Kernel kernel;
    if (auto k = mlir::dyn_cast<ir::KernelOp>(op)) {
      kernel.name = k.getName().str();
      for (mlir::Attribute p : k.getPatterns())
        kernel.patterns.push_back(mlir::cast<mlir::StringAttr>(p).getValue().str());
    } else {
      kernel.name = op.getName().stripDialect().str();
      kernel.hostCopy = mlir::isa<UploadOp>(op);
    }
    for (mlir::Operation *member : membersOf(&op)) {
      SINTER_ASSIGN_OR_RETURN(sinter::KernelMember m, extractor.memberOp(member));
      if (m.entry.kind == TraceEntry::Kind::Upload && m.entry.payload >= trace.payloads.size())
        return absl::InternalError("upload of a payload the trace does not have");
      kernel.ops.push_back(m);
    }
    program.kernels.push_back(std::move(kernel));
  }
  return program;
}

} // namespace sinter::passes
