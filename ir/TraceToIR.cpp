// TraceToIR.cpp - builds the sinter dialect module of a recorded Trace.
//
// The recorder works on mutable buffers; the IR has value semantics. The builder keeps, per slot,
// the SSA value of the slot's current version: a read takes the version current at its position,
// a write takes it as the "old" operand and replaces it with the op's result. SSA order is then
// program order, so write-after-read hazards need no extra edges.
#include "ir/TraceToIR.h"
#include "ir/TraceToModule.h"

#include <map>

#include "absl/strings/str_format.h"
#include "ir/Registration.h"
#include "ir/SinterDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "sinter/Status.h"
#include "llvm/Support/raw_ostream.h"

namespace sinter::ir {
namespace {

// The integers of one entry, in OpCall::ints order: an op's ints, or an upload's byte count.
uint8_t numIntsOf(const TraceEntry &entry) {
  return entry.kind == TraceEntry::Kind::Upload ? 1 : opInfo(entry.op.kind).numInts;
}

class TraceBuilder {
public:
  TraceBuilder(mlir::MLIRContext &context, const Trace &trace, absl::Span<const IntSlot> params)
      : context_(context), trace_(trace), params_(params), b_(&context) {}

  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> build();

private:
  absl::Status checkParams();
  absl::StatusOr<mlir::Value> bufferOperand(size_t entry, BufferHandle handle);
  mlir::Value intOperand(size_t entry, uint8_t index, uint64_t value);
  absl::Status addOp(size_t entry, const OpCall &op);
  absl::Status addUpload(size_t entry, const TraceEntry &upload);
  void addReturn(mlir::Location loc);

  mlir::MLIRContext &context_;
  const Trace &trace_;
  absl::Span<const IntSlot> params_;
  mlir::OpBuilder b_;
  mlir::func::FuncOp func_;
  std::map<std::pair<uint32_t, uint8_t>, unsigned> paramIndex_; // IntSlot -> parameter number
  std::map<uint64_t, mlir::Value> constants_;                   // reused i64 constants
  mlir::Operation *lastConstant_ = nullptr;
  std::vector<mlir::Value> current_; // current version per slot
  std::vector<bool> written_;
};

absl::Status TraceBuilder::checkParams() {
  for (size_t i = 0; i < params_.size(); ++i) {
    IntSlot p = params_[i];
    if (p.entry >= trace_.entries.size())
      return absl::InvalidArgumentError(absl::StrFormat("parameter %d names entry %d, trace has %d",
                                                        i, p.entry, trace_.entries.size()));
    uint8_t numInts = numIntsOf(trace_.entries[p.entry]);
    if (p.index >= numInts)
      return absl::InvalidArgumentError(absl::StrFormat(
          "parameter %d names integer %d of entry %d, which has %d", i, p.index, p.entry, numInts));
    if (!paramIndex_.emplace(std::make_pair(p.entry, p.index), unsigned(i)).second)
      return absl::InvalidArgumentError(
          absl::StrFormat("parameter %d repeats integer %d of entry %d", i, p.index, p.entry));
  }
  return absl::OkStatus();
}

absl::StatusOr<mlir::Value> TraceBuilder::bufferOperand(size_t entry, BufferHandle handle) {
  uint32_t slot = Trace::slotOf(handle);
  if (!handle.valid() || slot >= current_.size())
    return absl::InvalidArgumentError(absl::StrFormat("entry %d names buffer slot %d, trace has %d",
                                                      entry, int64_t(handle.id) - 1,
                                                      current_.size()));
  return current_[slot];
}

mlir::Value TraceBuilder::intOperand(size_t entry, uint8_t index, uint64_t value) {
  auto param = paramIndex_.find({uint32_t(entry), index});
  if (param != paramIndex_.end())
    return func_.getArgument(trace_.buffers.size() + param->second);
  mlir::Value &constant = constants_[value];
  if (!constant) {
    // Constants go to the top of the body, in order of first use, so that one value serves
    // every later use.
    mlir::OpBuilder::InsertionGuard guard(b_);
    if (lastConstant_)
      b_.setInsertionPointAfter(lastConstant_);
    else
      b_.setInsertionPointToStart(&func_.getBody().front());
    lastConstant_ = b_.create<mlir::arith::ConstantIntOp>(b_.getUnknownLoc(), int64_t(value), 64);
    constant = lastConstant_->getResult(0);
  }
  return constant;
}

absl::Status TraceBuilder::addOp(size_t entry, const OpCall &op) {
  const OpInfo &info = opInfo(op.kind);
  const GraphOpDesc &desc = graphOpDesc(op.kind);
  mlir::Location loc =
      mlir::NameLoc::get(b_.getStringAttr(absl::StrFormat("entry %d: %s", entry, info.name)));
  mlir::OperationState state(loc, desc.name);
  for (int i = 0; i < info.numBuffers; ++i) {
    SINTER_ASSIGN_OR_RETURN(mlir::Value version, bufferOperand(entry, op.buffers[i]));
    state.addOperands(version);
  }
  for (int i = 0; i < info.numInts; ++i)
    state.addOperands(intOperand(entry, uint8_t(i), op.ints[i]));
  int firstWritten = info.numBuffers - int(desc.numWritten);
  for (int i = firstWritten; i < info.numBuffers; ++i) {
    if (i > firstWritten && op.buffers[i] == op.buffers[i - 1])
      return absl::InvalidArgumentError(absl::StrFormat("entry %d: %s writes buffer slot %d twice",
                                                        entry, info.name,
                                                        Trace::slotOf(op.buffers[i])));
    state.addTypes(state.operands[i].getType());
  }
  // A graph op has at most one inherent attribute: its float argument or its dtype.
  llvm::ArrayRef<mlir::StringAttr> attrNames = state.name.getAttributeNames();
  if (info.scalarName)
    state.addAttribute(attrNames.front(), b_.getF32FloatAttr(op.scalar));
  if (info.hasDType)
    state.addAttribute(attrNames.front(), b_.getI32IntegerAttr(int32_t(op.dtype)));
  mlir::Operation *created = b_.create(state);
  for (int i = firstWritten; i < info.numBuffers; ++i) {
    uint32_t slot = Trace::slotOf(op.buffers[i]);
    current_[slot] = created->getResult(i - firstWritten);
    written_[slot] = true;
  }
  return absl::OkStatus();
}

absl::Status TraceBuilder::addUpload(size_t entry, const TraceEntry &upload) {
  if (upload.payload >= trace_.payloads.size())
    return absl::InvalidArgumentError(absl::StrFormat("entry %d uploads payload %d, trace has %d",
                                                      entry, upload.payload,
                                                      trace_.payloads.size()));
  SINTER_ASSIGN_OR_RETURN(mlir::Value old,
                          bufferOperand(entry, Trace::handleOfSlot(upload.uploadSlot)));
  mlir::Location loc =
      mlir::NameLoc::get(b_.getStringAttr(absl::StrFormat("entry %d: upload", entry)));
  auto op = b_.create<UploadOp>(loc, old.getType(), b_.getI64IntegerAttr(upload.payload), old,
                                intOperand(entry, 0, upload.uploadBytes));
  current_[upload.uploadSlot] = op.getResult();
  written_[upload.uploadSlot] = true;
  return absl::OkStatus();
}

// Results: the final version of every observable slot the trace wrote. A slot it only read
// keeps its incoming version, which the caller already has; a freed slot is dead at its last read.
void TraceBuilder::addReturn(mlir::Location loc) {
  llvm::SmallVector<mlir::Value> results;
  llvm::SmallVector<uint32_t> slots;
  for (uint32_t s = 0; s < trace_.buffers.size(); ++s) {
    if (!written_[s] || !trace_.buffers[s].observable)
      continue;
    results.push_back(current_[s]);
    slots.push_back(s);
  }
  b_.create<mlir::func::ReturnOp>(loc, results);
  func_.setFunctionType(
      b_.getFunctionType(func_.getArgumentTypes(), mlir::ValueRange(results).getTypes()));
  for (auto [i, slot] : llvm::enumerate(slots))
    func_.setResultAttr(i, kSlotAttrName, b_.getI64IntegerAttr(slot));
}

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> TraceBuilder::build() {
  SINTER_RETURN_IF_ERROR(checkParams());
  mlir::Location loc = mlir::NameLoc::get(b_.getStringAttr("trace"));
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
  llvm::SmallVector<mlir::Type> argTypes;
  for (const TraceBuffer &buffer : trace_.buffers)
    argTypes.push_back(BufferType::get(&context_, buffer.sizeBytes));
  argTypes.append(params_.size(), b_.getI64Type());
  b_.setInsertionPointToEnd(module->getBody());
  func_ = b_.create<mlir::func::FuncOp>(loc, "trace", b_.getFunctionType(argTypes, {}));
  mlir::Block *body = func_.addEntryBlock();
  for (uint32_t s = 0; s < trace_.buffers.size(); ++s)
    func_.setArgAttr(s, kSlotAttrName, b_.getI64IntegerAttr(s));
  for (auto [i, p] : llvm::enumerate(params_))
    func_.setArgAttr(trace_.buffers.size() + i, kParamAttrName,
                     b_.getDenseI64ArrayAttr({int64_t(p.entry), int64_t(p.index)}));
  current_.assign(body->getArguments().begin(),
                  body->getArguments().begin() + trace_.buffers.size());
  written_.assign(trace_.buffers.size(), false);

  b_.setInsertionPointToEnd(body);
  for (size_t e = 0; e < trace_.entries.size(); ++e) {
    const TraceEntry &entry = trace_.entries[e];
    SINTER_RETURN_IF_ERROR(entry.kind == TraceEntry::Kind::Upload ? addUpload(e, entry)
                                                                  : addOp(e, entry.op));
  }
  addReturn(loc);

  // Collect the verifier's messages instead of printing them: the caller gets them in the Status.
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  mlir::ScopedDiagnosticHandler handler(&context_, [&](mlir::Diagnostic &diag) {
    os << (diagnostics.empty() ? "" : "; ") << diag.getLocation() << ": " << diag;
    return mlir::success();
  });
  if (mlir::failed(mlir::verify(*module)))
    return absl::InternalError("trace module does not verify: " + os.str());
  return module;
}

} // namespace

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildTraceModule(mlir::MLIRContext &context, const Trace &trace, absl::Span<const IntSlot> params) {
  return TraceBuilder(context, trace, params).build();
}

absl::StatusOr<std::string> traceToMlirText(const Trace &trace, absl::Span<const IntSlot> params) {
  std::unique_ptr<mlir::MLIRContext> context = makeSinterContext();
  SINTER_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module,
                          buildTraceModule(*context, trace, params));
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  return text;
}

} // namespace sinter::ir
