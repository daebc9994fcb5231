// SpirvLegalize.cpp - scalarizes the wide vectors and narrow types that Dequant.h emits.
//
// The shared dequantizers decode a whole group (16 or 32 weights) as one vector of i8/i16/f16
// lanes, which suits the CPU. Vulkan's Shader capability has neither vectors wider than 4 nor
// 8/16-bit arithmetic without extra features, and MLIR's emulation of narrow integers does not
// keep signed conversions right. So every such value is split here into one scalar per lane:
// narrow integers are held zero-extended in i32 (re-masked after ops that can overflow, sign-
// extended where a signed op reads them) and halves as their 16 bits in an i32, widened to f32
// with integer ops. The kernel builders then see only what SPIR-V accepts.
#include <cassert>

#include "absl/strings/str_cat.h"
#include "codegen/ElementwiseMath.h"
#include "codegen/spirv/SpirvEmitter.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

namespace sinter::codegen::spv {

using mlir::Operation;
using mlir::Type;
using mlir::Value;
namespace arith = mlir::arith;
namespace vector = mlir::vector;

namespace {

bool isNarrow(Type t) {
  if (auto i = mlir::dyn_cast<mlir::IntegerType>(t))
    return i.getWidth() < 32 && i.getWidth() != 1;
  return t.isF16() || t.isBF16();
}

bool isIllegal(Type t) {
  if (auto v = mlir::dyn_cast<mlir::VectorType>(t))
    return v.getNumElements() > 4 || isNarrow(v.getElementType());
  return isNarrow(t);
}

// Bits of a narrow integer type (32 for everything held at full width).
unsigned widthOf(Type element) {
  if (auto i = mlir::dyn_cast<mlir::IntegerType>(element))
    return i.getWidth();
  return element.isF16() ? 16 : 32;
}

class Scalarizer {
public:
  explicit Scalarizer(mlir::OpBuilder &b) : b_(b) {}

  mlir::LogicalResult run(Operation *root, std::string *error);

private:
  using Lanes = llvm::SmallVector<Value, 32>;

  Value c32(mlir::Location loc, int64_t v) { return b_.create<arith::ConstantIntOp>(loc, v, 32); }
  Value mask(mlir::Location loc, Value v, unsigned bits) {
    if (bits >= 32)
      return v;
    return b_.create<arith::AndIOp>(loc, v, c32(loc, (int64_t(1) << bits) - 1));
  }
  Value signExtend(mlir::Location loc, Value v, unsigned bits) {
    if (bits >= 32)
      return v;
    Value s = c32(loc, 32 - bits);
    return b_.create<arith::ShRSIOp>(loc, b_.create<arith::ShLIOp>(loc, v, s), s);
  }
  Value halfToFloat(mlir::Location loc, Value h);

  // The lanes of `v` (computed before, or `v` itself for a legal scalar).
  const Lanes &lanes(Value v) {
    auto it = lanes_.find(v);
    if (it != lanes_.end())
      return it->second;
    Lanes &l = lanes_[v];
    l.push_back(v);
    return l;
  }
  mlir::LogicalResult rewrite(Operation *op, Lanes *out);
  mlir::LogicalResult rewriteConstant(arith::ConstantOp op, Lanes *out);

  mlir::OpBuilder &b_;
  llvm::DenseMap<Value, Lanes> lanes_;
};

// IEEE half (16 bits in an i32) to f32, exactly: normals by moving the exponent, subnormals as
// an integer times 2^-24 (a GPU may flush float subnormals, so they are never formed), inf/NaN
// by setting the full exponent.
Value Scalarizer::halfToFloat(mlir::Location loc, Value h) {
  auto &b = b_;
  Type f32 = b.getF32Type();
  Value magnitude = b.create<arith::AndIOp>(loc, h, c32(loc, 0x7fff));
  Value sign =
      b.create<arith::ShLIOp>(loc, b.create<arith::AndIOp>(loc, h, c32(loc, 0x8000)), c32(loc, 16));
  Value shifted = b.create<arith::ShLIOp>(loc, magnitude, c32(loc, 13));
  Value normal = b.create<arith::AddIOp>(loc, shifted, c32(loc, (127 - 15) << 23));
  Value special = b.create<arith::OrIOp>(loc, shifted, c32(loc, 0x7f800000));
  Value isSpecial =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::uge, magnitude, c32(loc, 0x7c00));
  Value bits = b.create<arith::SelectOp>(loc, isSpecial, special, normal);
  Value subnormal = b.create<arith::MulFOp>(loc, b.create<arith::UIToFPOp>(loc, f32, magnitude),
                                            floatConstant(b, loc, f32, 0x1p-24));
  Value isSubnormal =
      b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, magnitude, c32(loc, 0x400));
  Value subnormalBits = b.create<arith::BitcastOp>(loc, b.getI32Type(), subnormal);
  Value unsignedBits = b.create<arith::SelectOp>(loc, isSubnormal, subnormalBits, bits);
  return b.create<arith::BitcastOp>(loc, f32, b.create<arith::OrIOp>(loc, unsignedBits, sign));
}

mlir::LogicalResult Scalarizer::rewriteConstant(arith::ConstantOp op, Lanes *out) {
  mlir::Location loc = op.getLoc();
  auto emit = [&](mlir::Attribute a) {
    if (auto i = mlir::dyn_cast<mlir::IntegerAttr>(a)) {
      out->push_back(c32(loc, static_cast<int64_t>(i.getValue().getZExtValue())));
      return;
    }
    auto f = mlir::cast<mlir::FloatAttr>(a);
    if (f.getType().isF32()) {
      out->push_back(floatConstant(b_, loc, b_.getF32Type(), f.getValueAsDouble()));
      return;
    }
    out->push_back(c32(loc, static_cast<int64_t>(f.getValue().bitcastToAPInt().getZExtValue())));
  };
  mlir::Attribute value = op.getValue();
  if (auto dense = mlir::dyn_cast<mlir::DenseElementsAttr>(value)) {
    for (mlir::Attribute a : dense.getValues<mlir::Attribute>())
      emit(a);
    return mlir::success();
  }
  emit(value);
  return mlir::success();
}

mlir::LogicalResult Scalarizer::rewrite(Operation *op, Lanes *out) {
  mlir::Location loc = op->getLoc();
  Type resultType = op->getResult(0).getType();
  Type element = mlir::getElementTypeOrSelf(resultType);
  unsigned bits = widthOf(element);
  auto operandElement = [&](int i) {
    return mlir::getElementTypeOrSelf(op->getOperand(i).getType());
  };
  size_t n = 1;
  if (auto v = mlir::dyn_cast<mlir::VectorType>(resultType))
    n = v.getNumElements();

  if (auto c = mlir::dyn_cast<arith::ConstantOp>(op))
    return rewriteConstant(c, out);
  if (auto shuffle = mlir::dyn_cast<vector::ShuffleOp>(op)) {
    Lanes all(lanes(shuffle.getV1()));
    const Lanes &second = lanes(shuffle.getV2());
    all.append(second.begin(), second.end());
    for (mlir::Attribute i : shuffle.getMask())
      out->push_back(all[mlir::cast<mlir::IntegerAttr>(i).getInt()]);
    return mlir::success();
  }
  if (auto broadcast = mlir::dyn_cast<vector::BroadcastOp>(op)) {
    const Lanes &source = lanes(broadcast.getSource());
    if (source.size() != 1)
      return mlir::failure();
    out->assign(n, source[0]);
    return mlir::success();
  }
  if (auto splatOp = mlir::dyn_cast<vector::SplatOp>(op)) {
    out->assign(n, lanes(splatOp.getInput())[0]);
    return mlir::success();
  }
  if (auto from = mlir::dyn_cast<vector::FromElementsOp>(op)) {
    for (Value v : from.getElements())
      out->push_back(lanes(v)[0]);
    return mlir::success();
  }
  if (auto extract = mlir::dyn_cast<vector::ExtractOp>(op)) {
    llvm::ArrayRef<int64_t> position = extract.getStaticPosition();
    if (position.size() != 1 || !extract.getDynamicPosition().empty())
      return mlir::failure();
    out->push_back(lanes(extract.getVector())[position[0]]);
    return mlir::success();
  }

  // Element-wise ops: one op per lane on the operands' lanes.
  llvm::SmallVector<const Lanes *, 3> ins;
  for (Value v : op->getOperands())
    ins.push_back(&lanes(v));
  for (const Lanes *in : ins)
    if (in->size() != n)
      return mlir::failure();
  Type laneType = element.isF32() ? element : Type(b_.getI32Type());
  if (element.isInteger(1))
    laneType = element;
  for (size_t i = 0; i < n; ++i) {
    auto arg = [&](int k) { return (*ins[k])[i]; };
    Value r;
    if (mlir::isa<arith::AndIOp, arith::OrIOp, arith::XOrIOp, arith::ShRUIOp, arith::DivUIOp,
                  arith::RemUIOp, arith::MinUIOp, arith::MaxUIOp, arith::AddFOp, arith::SubFOp,
                  arith::MulFOp, arith::DivFOp, arith::NegFOp, arith::MaxNumFOp, arith::MinNumFOp,
                  arith::SelectOp>(op)) {
      mlir::OperationState state(loc, op->getName());
      for (size_t k = 0; k < ins.size(); ++k)
        state.addOperands(arg(k));
      state.addTypes(laneType);
      state.addAttributes(op->getAttrs());
      r = b_.create(state)->getResult(0);
    } else if (mlir::isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::ShLIOp>(op)) {
      mlir::OperationState state(loc, op->getName());
      state.addOperands({arg(0), arg(1)});
      state.addTypes(laneType);
      r = mask(loc, b_.create(state)->getResult(0), bits);
    } else if (mlir::isa<arith::TruncIOp>(op)) {
      r = mask(loc, arg(0), bits);
    } else if (mlir::isa<arith::ExtUIOp>(op)) {
      r = arg(0);
    } else if (mlir::isa<arith::ExtSIOp>(op)) {
      r = mask(loc, signExtend(loc, arg(0), widthOf(operandElement(0))), bits);
    } else if (mlir::isa<arith::SIToFPOp>(op)) {
      r = b_.create<arith::SIToFPOp>(loc, laneType,
                                     signExtend(loc, arg(0), widthOf(operandElement(0))));
    } else if (mlir::isa<arith::UIToFPOp>(op)) {
      r = b_.create<arith::UIToFPOp>(loc, laneType, arg(0));
    } else if (mlir::isa<arith::BitcastOp>(op)) {
      // i16 <-> f16 keep their bits; i32 <-> f32 is a real bitcast.
      r = arg(0).getType() == laneType ? arg(0)
                                       : Value(b_.create<arith::BitcastOp>(loc, laneType, arg(0)));
    } else if (mlir::isa<arith::ExtFOp>(op)) {
      if (!operandElement(0).isF16() || !element.isF32())
        return mlir::failure();
      r = halfToFloat(loc, arg(0));
    } else {
      return mlir::failure();
    }
    out->push_back(r);
  }
  return mlir::success();
}

mlir::LogicalResult Scalarizer::run(Operation *root, std::string *error) {
  llvm::SmallVector<Operation *> rewritten;
  mlir::WalkResult walk = root->walk<mlir::WalkOrder::PreOrder>([&](Operation *op) {
    bool touches = false;
    for (Value v : op->getOperands())
      touches |= isIllegal(v.getType());
    for (Value v : op->getResults())
      touches |= isIllegal(v.getType());
    if (!touches)
      return mlir::WalkResult::advance();
    if (op->getNumResults() != 1) {
      llvm::raw_string_ostream os(*error);
      os << "cannot scalarize " << op->getName() << " for SPIR-V";
      return mlir::WalkResult::interrupt();
    }
    b_.setInsertionPoint(op);
    Lanes out;
    if (mlir::failed(rewrite(op, &out))) {
      llvm::raw_string_ostream os(*error);
      os << "cannot scalarize " << *op << " for SPIR-V";
      return mlir::WalkResult::interrupt();
    }
    Value result = op->getResult(0);
    if (isIllegal(result.getType()))
      lanes_[result] = std::move(out);
    else if (mlir::isa<mlir::VectorType>(result.getType()))
      result.replaceAllUsesWith(
          b_.create<vector::FromElementsOp>(op->getLoc(), result.getType(), out));
    else
      result.replaceAllUsesWith(out[0]);
    rewritten.push_back(op);
    return mlir::WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return mlir::failure();
  for (auto it = rewritten.rbegin(); it != rewritten.rend(); ++it) {
    if (!(*it)->use_empty()) {
      llvm::raw_string_ostream os(*error);
      os << "a scalarized value is still used by " << **(*it)->getUsers().begin();
      return mlir::failure();
    }
    (*it)->erase();
  }
  return mlir::success();
}

} // namespace

absl::Status legalizeForSpirv(Operation *root) {
  mlir::OpBuilder b(root->getContext());
  Scalarizer scalarizer(b);
  std::string error;
  if (mlir::failed(scalarizer.run(root, &error)))
    return absl::InternalError(absl::StrCat("legalizeForSpirv: ", error));
  return absl::OkStatus();
}

} // namespace sinter::codegen::spv
