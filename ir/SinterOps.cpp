// SinterOps.cpp - verifiers, custom syntax and the OpKind table of the sinter ops.
//
// Graph ops share one verifier that reuses support/Ops.cpp's rules (opAccesses), so an op the
// recorder would reject is also rejected here, with the same wording minus the op-name prefix
// that MLIR's "'sinter.x' op" already provides. This file also holds the generated op definitions.
#include "ir/SinterDialect.h"

#include <array>
#include <string>
#include <type_traits>

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "sinter/DType.h"

namespace sinter::ir {
namespace {

// The constant value of an i64 operand, if it is one.
std::optional<int64_t> constantInt(mlir::Value v) {
  llvm::APInt value;
  if (!mlir::matchPattern(v, mlir::m_ConstantInt(&value)))
    return std::nullopt;
  return value.getSExtValue();
}

// Drops support's "<op name>: " prefix; MLIR's diagnostic already names the op.
std::string withoutOpPrefix(const absl::Status &status, llvm::StringRef opName) {
  llvm::StringRef message(status.message().data(), status.message().size());
  message.consume_front((opName + ": ").str());
  return message.str();
}

uint64_t bufferBytes(mlir::Value v) { return mlir::cast<BufferType>(v.getType()).getSizeBytes(); }

// The checks that need only some integers to be constant. With every integer constant,
// opAccesses repeats them (with the same wording) and adds the rest.
mlir::LogicalResult verifyPartialConstants(mlir::Operation *op, OpKind kind,
                                           llvm::ArrayRef<std::optional<int64_t>> ints) {
  if (kind == OpKind::Rope && ints[1]) {
    if (*ints[1] == 0)
      return op->emitOpError("head_dim must be positive (the angle divides by it)");
    if (*ints[1] % 2 != 0)
      return op->emitOpError() << "head_dim " << *ints[1] << " is odd; rope rotates pairs";
  }
  if (kind == OpKind::AttnScore && ints[0] && *ints[0] == 0)
    return op->emitOpError("head_dim must be positive (scores divide by sqrt(head_dim))");
  if (kind != OpKind::QuantizedMatmul)
    return mlir::success();
  auto dtype = static_cast<DType>(op->getAttrOfType<mlir::IntegerAttr>("dtype").getInt());
  if (absl::Status st = checkWeightDType(dtype, opInfo(kind).name); !st.ok())
    return op->emitOpError(withoutOpPrefix(st, opInfo(kind).name));
  const DTypeInfo &info = dtypeInfo(dtype);
  if (ints[1] && *ints[1] % info.blockSize != 0)
    return op->emitOpError() << "n_cols " << *ints[1] << " is not a multiple of the " << info.name
                             << " block size " << info.blockSize;
  return mlir::success();
}

} // namespace

mlir::LogicalResult verifyGraphOp(mlir::Operation *op, OpKind kind) {
  const OpInfo &info = opInfo(kind);
  assert(op->getNumOperands() == unsigned(info.numBuffers + info.numInts) &&
         "SinterOps.td operands out of step with support/Ops.cpp");
  std::array<std::optional<int64_t>, 5> ints;
  bool allConstant = true;
  for (int i = 0; i < info.numInts; ++i) {
    ints[i] = constantInt(op->getOperand(info.numBuffers + i));
    allConstant = allConstant && ints[i].has_value();
    if (ints[i] && *ints[i] < 0)
      return op->emitOpError() << info.intNames[i] << " is negative (" << *ints[i] << ")";
  }
  if (mlir::failed(verifyPartialConstants(op, kind, ints)))
    return mlir::failure();
  OpCall call;
  call.kind = kind;
  if (info.scalarName)
    call.scalar = float(op->getAttrOfType<mlir::FloatAttr>(info.scalarName).getValueAsDouble());
  if (absl::Status st = checkScalar(call); !st.ok())
    return op->emitOpError(withoutOpPrefix(st, info.name));
  if (!allConstant)
    return mlir::success();

  // Buffers get handles by SSA value: the same version twice is the same buffer (the in-place
  // forms), two different versions never alias.
  for (int i = 0; i < info.numBuffers; ++i) {
    int first = 0;
    while (op->getOperand(first) != op->getOperand(i))
      ++first;
    call.buffers[i] = BufferHandle{uint64_t(first) + 1};
  }
  for (int i = 0; i < info.numInts; ++i)
    call.ints[i] = uint64_t(*ints[i]);
  if (info.hasDType)
    call.dtype = static_cast<DType>(op->getAttrOfType<mlir::IntegerAttr>("dtype").getInt());
  absl::StatusOr<AccessList> accesses = opAccesses(call);
  if (!accesses.ok())
    return op->emitOpError(withoutOpPrefix(accesses.status(), info.name));
  for (const BufferAccess &a : *accesses) {
    uint64_t have = bufferBytes(op->getOperand(a.bufferIndex));
    // A saturated size stands for a range past 2^64 bytes (support/Ops.cpp).
    if (a.size == 0 || (a.size != UINT64_MAX && a.size <= have && a.offset <= have - a.size))
      continue;
    mlir::InFlightDiagnostic diag = op->emitOpError()
                                    << info.bufferNames[a.bufferIndex] << " buffer holds " << have
                                    << " bytes, needs ";
    uint64_t end;
    if (a.size == UINT64_MAX || __builtin_add_overflow(a.offset, a.size, &end))
      return diag << "more than 2^64 - 1 bytes";
    if (a.offset == 0)
      return diag << a.size;
    return diag << "bytes [" << a.offset << ", " << end << ")";
  }
  return mlir::success();
}

//===----------------------------------------------------------------------===//
// The OpKind table, generated from the op list
//===----------------------------------------------------------------------===//

namespace {

template <typename OpT, typename = void> struct IsGraphOp : std::false_type {};
template <typename OpT>
struct IsGraphOp<OpT, std::void_t<decltype(OpT::kOpKind)>> : std::true_type {};

template <typename... OpTs> constexpr int countGraphOps() {
  return (0 + ... + (IsGraphOp<OpTs>::value ? 1 : 0));
}

template <typename OpT> void addGraphOp(std::array<GraphOpDesc, kNumOpKinds> &table) {
  if constexpr (IsGraphOp<OpT>::value) {
    constexpr bool one = OpT::template hasTrait<mlir::OpTrait::OneResult>();
    constexpr bool two = OpT::template hasTrait<mlir::OpTrait::NResults<2>::Impl>();
    static_assert(one || two, "a graph op writes one or two buffers");
    table[static_cast<int>(OpT::kOpKind)] = {OpT::getOperationName(), one ? 1u : 2u};
  }
}

template <typename... OpTs> std::array<GraphOpDesc, kNumOpKinds> makeGraphOpTable() {
  static_assert(countGraphOps<OpTs...>() == kNumOpKinds,
                "SinterOps.td needs exactly one graph op per sinter::OpKind");
  std::array<GraphOpDesc, kNumOpKinds> table{};
  (addGraphOp<OpTs>(table), ...);
  return table;
}

const std::array<GraphOpDesc, kNumOpKinds> &graphOpTable() {
  static const std::array<GraphOpDesc, kNumOpKinds> table = makeGraphOpTable<
#define GET_OP_LIST
#include "ir/SinterOps.cpp.inc"
      >();
  return table;
}

} // namespace

const GraphOpDesc &graphOpDesc(OpKind kind) { return graphOpTable()[static_cast<int>(kind)]; }

std::optional<OpKind> graphOpKind(mlir::Operation *op) {
  llvm::StringRef name = op->getName().getStringRef();
  const auto &table = graphOpTable();
  for (int i = 0; i < kNumOpKinds; ++i)
    if (table[i].name == name)
      return static_cast<OpKind>(i);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Non-graph ops
//===----------------------------------------------------------------------===//

namespace {

// `name` buffer of `have` bytes must hold [offset, offset + size).
mlir::LogicalResult checkRange(mlir::Operation *op, llvm::StringRef name, uint64_t have,
                               std::optional<int64_t> offset, uint64_t size) {
  if (!offset)
    return size <= have ? mlir::success()
                        : op->emitOpError() << name << " buffer holds " << have
                                            << " bytes, sub-range has " << size;
  if (*offset < 0)
    return op->emitOpError() << "offset is negative (" << *offset << ")";
  uint64_t off = uint64_t(*offset);
  if (size <= have && off <= have - size)
    return mlir::success();
  return op->emitOpError() << name << " buffer holds " << have << " bytes, needs bytes [" << off
                           << ", " << off + size << ")";
}

} // namespace

mlir::LogicalResult UploadOp::verify() {
  if (getPayloadAttr().getInt() < 0)
    return emitOpError() << "payload index is negative (" << getPayloadAttr().getInt() << ")";
  std::optional<int64_t> size = constantInt(getSize());
  if (!size)
    return mlir::success();
  if (*size < 0)
    return emitOpError() << "size is negative (" << *size << ")";
  uint64_t have = bufferBytes(getDst());
  if (uint64_t(*size) > have)
    return emitOpError() << "dst buffer holds " << have << " bytes, host slice has " << *size;
  return mlir::success();
}

mlir::LogicalResult ExtractOp::verify() {
  return checkRange(*this, "source", bufferBytes(getSource()), constantInt(getOffset()),
                    bufferBytes(getResult()));
}

mlir::LogicalResult InsertOp::verify() {
  return checkRange(*this, "dest", bufferBytes(getDest()), constantInt(getOffset()),
                    bufferBytes(getValue()));
}

mlir::LogicalResult KernelOp::verify() {
  mlir::Block &body = getBodyBlock();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments() << " arguments for "
                         << getInputs().size() << " inputs";
  for (auto [i, input, arg] : llvm::enumerate(getInputs(), body.getArguments()))
    if (input.getType() != arg.getType())
      return emitOpError() << "body argument " << i << " has type " << arg.getType()
                           << ", input has " << input.getType();
  auto yield = llvm::dyn_cast_if_present<YieldOp>(body.empty() ? nullptr : &body.back());
  if (!yield)
    return emitOpError("body must end with sinter.yield");
  if (yield.getValues().size() != getNumResults())
    return emitOpError() << "yields " << yield.getValues().size() << " values for "
                         << getNumResults() << " results";
  for (auto [i, value, result] : llvm::enumerate(yield.getValues(), getResults()))
    if (value.getType() != result.getType())
      return emitOpError() << "yielded value " << i << " has type " << value.getType()
                           << ", result has " << result.getType();
  return mlir::success();
}

// sinter.kernel "name" patterns ["p", ...] (%arg = %input, ...) : (types) -> (types)
//     attributes {...} { body }
mlir::ParseResult KernelOp::parse(mlir::OpAsmParser &parser, mlir::OperationState &result) {
  mlir::StringAttr name;
  mlir::ArrayAttr patterns;
  llvm::SmallVector<mlir::OpAsmParser::Argument> args;
  llvm::SmallVector<mlir::OpAsmParser::UnresolvedOperand> inputs;
  llvm::SmallVector<mlir::Type> inputTypes;
  llvm::SMLoc inputsLoc;
  if (parser.parseAttribute(name) || parser.parseKeyword("patterns") ||
      parser.parseAttribute(patterns))
    return mlir::failure();
  inputsLoc = parser.getCurrentLocation();
  if (parser.parseAssignmentList(args, inputs) || parser.parseColon() ||
      parser.parseCommaSeparatedList(mlir::AsmParser::Delimiter::Paren,
                                     [&] { return parser.parseType(inputTypes.emplace_back()); }) ||
      parser.parseArrowTypeList(result.types) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return mlir::failure();
  if (args.size() != inputTypes.size())
    return parser.emitError(inputsLoc)
           << inputs.size() << " inputs but " << inputTypes.size() << " input types";
  for (auto [arg, type] : llvm::zip(args, inputTypes))
    arg.type = type;
  result.addAttribute(getNameAttrName(result.name), name);
  result.addAttribute(getPatternsAttrName(result.name), patterns);
  if (parser.resolveOperands(inputs, inputTypes, inputsLoc, result.operands))
    return mlir::failure();
  return parser.parseRegion(*result.addRegion(), args);
}

void KernelOp::print(mlir::OpAsmPrinter &p) {
  p << ' ';
  p.printAttribute(getNameAttr());
  p << " patterns ";
  p.printAttribute(getPatternsAttr());
  p << " (";
  llvm::interleaveComma(llvm::zip(getBodyBlock().getArguments(), getInputs()), p,
                        [&](auto pair) { p << std::get<0>(pair) << " = " << std::get<1>(pair); });
  p << ") : (";
  llvm::interleaveComma(getInputs().getTypes(), p);
  p << ") -> (";
  llvm::interleaveComma(getResultTypes(), p);
  p << ")";
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                     {getNameAttrName(), getPatternsAttrName()});
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

} // namespace sinter::ir

//===----------------------------------------------------------------------===//
// custom<GgufDType>: a GGUF type id printed as its name, `dtype = "Q4_0"`
//===----------------------------------------------------------------------===//

namespace sinter::ir {
namespace {

// Accepts a name ("Q4_0", any case) or a bare id; the verifier judges the id.
mlir::ParseResult parseGgufDType(mlir::OpAsmParser &parser, mlir::IntegerAttr &attr) {
  mlir::Type i32 = parser.getBuilder().getI32Type();
  std::string name;
  llvm::SMLoc loc = parser.getCurrentLocation();
  if (mlir::succeeded(parser.parseOptionalString(&name))) {
    DType dtype;
    if (!::sinter::parseDType(name, &dtype))
      return parser.emitError(loc) << "unknown dtype \"" << name << "\"";
    attr = mlir::IntegerAttr::get(i32, static_cast<int64_t>(dtype));
    return mlir::success();
  }
  int64_t id = 0;
  if (parser.parseInteger(id))
    return mlir::failure();
  attr = mlir::IntegerAttr::get(i32, id);
  return mlir::success();
}

void printGgufDType(mlir::OpAsmPrinter &p, mlir::Operation *, mlir::IntegerAttr attr) {
  int64_t id = attr.getInt();
  if (id >= 0 && lookupDType(uint32_t(id))) {
    p << '"' << lookupDType(uint32_t(id))->name << '"';
    return;
  }
  p << id;
}

} // namespace
} // namespace sinter::ir

#define GET_OP_CLASSES
#include "ir/SinterOps.cpp.inc"
