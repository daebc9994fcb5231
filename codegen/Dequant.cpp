// Dequant.cpp - one group decoder per GGUF format (support/Quant.cpp is the scalar original).
//
// Each decoder loads the group's quant bytes as one vector, extracts its bit fields with vector
// shifts and masks, and converts them to f32; the scales are scalar arithmetic on a few bytes of
// the block header. Offsets and shifts depend only on the (constant) group index, so nothing here
// branches at run time.
#include "codegen/Dequant.h"

#include <cassert>

#include "codegen/ElementwiseMath.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace sinter::codegen {

using mlir::Location;
using mlir::OpBuilder;
using mlir::Type;
using mlir::Value;
namespace arith = mlir::arith;

ByteReader::~ByteReader() = default;

bool isScalarFormat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

QuantLayout quantLayout(DType dtype) {
  const DTypeInfo &info = dtypeInfo(dtype);
  if (isScalarFormat(dtype))
    return {kScalarBlock, kScalarBlock * info.bytesPerBlock, kScalarBlock, false, false};
  int64_t group = 32;
  if (dtype == DType::Q2_K || dtype == DType::Q3_K || dtype == DType::Q6_K)
    group = 16;
  bool bias = dtype == DType::Q4_1 || dtype == DType::Q5_1 || dtype == DType::Q2_K ||
              dtype == DType::Q4_K || dtype == DType::Q5_K;
  return {info.blockSize, info.bytesPerBlock, group, true, bias};
}

namespace {

// The state shared by the decoders of one group.
struct Decoder {
  OpBuilder &b;
  Location loc;
  ByteReader &reader;
  Value block;

  Type vec(int64_t n, Type t) { return mlir::VectorType::get({n}, t); }
  Value ci(Type t, int64_t v) { return intConstant(b, loc, t, v); }
  Value bytes(int64_t offset, int64_t count) {
    return reader.loadBytes(b, loc, block, offset, count);
  }
  // An fp16 scale, widened to f32 (exact).
  Value half(int64_t offset) {
    Value bits = reader.loadU16(b, loc, block, offset, 1);
    Value h = b.create<arith::BitcastOp>(loc, b.getF16Type(), bits);
    return extendFloat(b, loc, b.getF32Type(), h);
  }
  Value shr(Value v, int64_t s) {
    return s == 0 ? v : b.create<arith::ShRUIOp>(loc, v, ci(v.getType(), s));
  }
  Value shl(Value v, int64_t s) {
    return s == 0 ? v : b.create<arith::ShLIOp>(loc, v, ci(v.getType(), s));
  }
  Value mask(Value v, int64_t m) { return b.create<arith::AndIOp>(loc, v, ci(v.getType(), m)); }
  Value bitOr(Value a, Value c) { return b.create<arith::OrIOp>(loc, a, c); }
  Value sub(Value v, int64_t c) { return b.create<arith::SubIOp>(loc, v, ci(v.getType(), c)); }
  // Bit field [shift, shift + width) of every element.
  Value field(Value v, int64_t shift, int64_t width) {
    return mask(shr(v, shift), (int64_t(1) << width) - 1);
  }
  Value toF32(Value v, bool isSigned) {
    Type t = mlir::isa<mlir::VectorType>(v.getType())
                 ? vec(mlir::cast<mlir::VectorType>(v.getType()).getNumElements(), b.getF32Type())
                 : Type(b.getF32Type());
    if (isSigned)
      return b.create<arith::SIToFPOp>(loc, t, v);
    return b.create<arith::UIToFPOp>(loc, t, v);
  }
  Value fmul(Value a, Value c) { return b.create<arith::MulFOp>(loc, a, c); }
  Value fneg(Value a) { return b.create<arith::NegFOp>(loc, a); }
  // A byte as i32 (for scale arithmetic).
  Value byteI32(int64_t offset) {
    return b.create<arith::ExtUIOp>(loc, b.getI32Type(), bytes(offset, 1));
  }

  // The 32 nibbles of a legacy block's 16 bytes: low nibbles are weights 0..15, high 16..31.
  Value legacyNibbles(int64_t offset) {
    Value qs = bytes(offset, 16);
    llvm::SmallVector<int64_t, 32> order;
    for (int64_t i = 0; i < 32; ++i)
      order.push_back(i);
    return b.create<mlir::vector::ShuffleOp>(loc, mask(qs, 0xf), shr(qs, 4), order);
  }
  // The fifth bits of a legacy 5-bit block, bit j of the u32 at `offset` for weight j, at bit 4.
  Value legacyHighBits(int64_t offset) {
    Value qh = reader.loadU32(b, loc, block, offset);
    Type v32 = vec(32, b.getI32Type());
    Value all = b.create<mlir::vector::BroadcastOp>(loc, v32, qh);
    llvm::SmallVector<int32_t, 32> lanes;
    for (int32_t i = 0; i < 32; ++i)
      lanes.push_back(i);
    Value shifts = b.create<arith::ConstantOp>(
        loc, mlir::DenseElementsAttr::get(mlir::cast<mlir::ShapedType>(v32),
                                          llvm::ArrayRef<int32_t>(lanes)));
    Value bits = mask(b.create<arith::ShRUIOp>(loc, all, shifts), 1);
    Value bits8 = b.create<arith::TruncIOp>(loc, vec(32, b.getI8Type()), bits);
    return shl(bits8, 4);
  }
};

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4), as i32.
void scaleMinK4(Decoder &d, int64_t j, Value *scale, Value *min) {
  const int64_t s = 4; // scales start at byte 4
  if (j < 4) {
    *scale = d.mask(d.byteI32(s + j), 63);
    *min = d.mask(d.byteI32(s + j + 4), 63);
    return;
  }
  Value packed = d.byteI32(s + j + 4);
  *scale = d.bitOr(d.mask(packed, 0xf), d.shl(d.shr(d.byteI32(s + j - 4), 6), 4));
  *min = d.bitOr(d.shr(packed, 4), d.shl(d.shr(d.byteI32(s + j), 6), 4));
}

// Q3_K: the signed 6-bit scale j, minus 32, as i32 (see q3kScale in Quant.cpp).
Value q3kScale(Decoder &d, int64_t j) {
  const int64_t s = 96;
  Value low = j < 8 ? d.mask(d.byteI32(s + j), 0xf) : d.shr(d.byteI32(s + j - 8), 4);
  Value high = d.field(d.byteI32(s + 8 + j % 4), 2 * (j / 4), 2);
  return d.sub(d.bitOr(low, d.shl(high, 4)), 32);
}

WeightGroup decodeScalarFormat(Decoder &d, DType dtype) {
  OpBuilder &b = d.b;
  if (dtype == DType::F32)
    return {d.reader.loadF32(b, d.loc, d.block, 0, kScalarBlock), {}, {}};
  Value words = d.reader.loadU16(b, d.loc, d.block, 0, kScalarBlock);
  if (dtype == DType::F16) {
    Value h = b.create<arith::BitcastOp>(d.loc, d.vec(kScalarBlock, b.getF16Type()), words);
    return {extendFloat(b, d.loc, d.vec(kScalarBlock, b.getF32Type()), h), {}, {}};
  }
  Value wide = b.create<arith::ExtUIOp>(d.loc, d.vec(kScalarBlock, b.getI32Type()), words);
  return {b.create<arith::BitcastOp>(d.loc, d.vec(kScalarBlock, b.getF32Type()), d.shl(wide, 16)),
          {},
          {}};
}

} // namespace

WeightGroup emitWeightGroup(OpBuilder &b, Location loc, ByteReader &reader, DType dtype,
                            Value block, int64_t g) {
  Decoder d{b, loc, reader, block};
  if (isScalarFormat(dtype))
    return decodeScalarFormat(d, dtype);
  switch (dtype) {
  case DType::Q4_0: // {d, qs[16]}: (q - 8) * d
    return {d.toF32(d.sub(d.legacyNibbles(2), 8), true), d.half(0), {}};
  case DType::Q4_1: // {d, m, qs[16]}: q * d + m
    return {d.toF32(d.legacyNibbles(4), false), d.half(0), d.half(2)};
  case DType::Q5_0: // {d, qh, qs[16]}: (q - 16) * d
    return {
        d.toF32(d.sub(d.bitOr(d.legacyNibbles(6), d.legacyHighBits(2)), 16), true), d.half(0), {}};
  case DType::Q5_1: // {d, m, qh, qs[16]}: q * d + m
    return {d.toF32(d.bitOr(d.legacyNibbles(8), d.legacyHighBits(4)), false), d.half(0), d.half(2)};
  case DType::Q8_0: // {d, qs[32] int8}
    return {d.toF32(d.bytes(2, 32), true), d.half(0), {}};
  case DType::Q2_K: { // {scales[16], qs[64], d, dmin}: 16-weight groups, 2-bit quants
    Value sc = d.byteI32(g);
    Value dl = d.fmul(d.half(80), d.toF32(d.mask(sc, 0xf), false));
    Value ml = d.fmul(d.half(82), d.toF32(d.shr(sc, 4), false));
    Value q = d.field(d.bytes(16 + 32 * (g / 8) + 16 * (g % 2), 16), 2 * (g % 8 / 2), 2);
    return {d.toF32(q, false), dl, d.fneg(ml)};
  }
  case DType::Q3_K: { // {hmask[32], qs[64], scales[12], d}: crumb - 4, +4 where hmask is set
    Value high = d.field(d.bytes(16 * (g % 2), 16), g / 2, 1);
    Value crumb = d.field(d.bytes(32 + 32 * (g / 8) + 16 * (g % 2), 16), 2 * (g % 8 / 2), 2);
    // q = crumb - 4 * (1 - high)
    Value q = b.create<arith::SubIOp>(
        loc, crumb, d.shl(b.create<arith::XOrIOp>(loc, high, d.ci(high.getType(), 1)), 2));
    Value dl = d.fmul(d.half(108), d.toF32(q3kScale(d, g), true));
    return {d.toF32(q, true), dl, {}};
  }
  case DType::Q4_K:
  case DType::Q5_K: { // {d, dmin, scales[12], (qh[32],) qs[128]}: 32-weight groups
    bool five = dtype == DType::Q5_K;
    Value sc, m;
    scaleMinK4(d, g, &sc, &m);
    Value d1 = d.fmul(d.half(0), d.toF32(sc, false));
    Value m1 = d.fmul(d.half(2), d.toF32(m, false));
    Value qs = d.bytes((five ? 48 : 16) + 32 * (g / 2), 32);
    Value q = g % 2 == 0 ? d.mask(qs, 0xf) : d.shr(qs, 4);
    if (five)
      q = d.bitOr(q, d.shl(d.field(d.bytes(16, 32), g, 1), 4));
    return {d.toF32(q, false), d1, d.fneg(m1)};
  }
  case DType::Q6_K: { // {ql[128], qh[64], scales[16] int8, d}: 16-weight groups, 6-bit quants
    int64_t h = g / 8, k = g % 8 / 2, l = 16 * (g % 2);
    Value ql = d.bytes(64 * h + 32 * (k % 2) + l, 16);
    Value low = k < 2 ? d.mask(ql, 0xf) : d.shr(ql, 4);
    Value high = d.field(d.bytes(128 + 32 * h + l, 16), 2 * k, 2);
    Value q = d.sub(d.bitOr(low, d.shl(high, 4)), 32);
    Value scale = d.fmul(d.half(208), d.toF32(d.bytes(192 + g, 1), true));
    return {d.toF32(q, true), scale, {}};
  }
  default:
    assert(false && "emitWeightGroup: dtype is not Supported");
    return {};
  }
}

Value emitDequantizedGroup(OpBuilder &b, Location loc, ByteReader &reader, DType dtype, Value block,
                           int64_t group) {
  WeightGroup w = emitWeightGroup(b, loc, reader, dtype, block, group);
  int64_t lanes = mlir::cast<mlir::VectorType>(w.q.getType()).getNumElements();
  Value v = w.q;
  // ggml's order: the scale product first, then the bias (no fused multiply-add).
  if (w.scale)
    v = b.create<arith::MulFOp>(loc, v, splat(b, loc, w.scale, lanes));
  if (w.bias)
    v = b.create<arith::AddFOp>(loc, v, splat(b, loc, w.bias, lanes));
  return v;
}

Value emitScalarWeight(OpBuilder &b, Location loc, ByteReader &reader, DType dtype, Value element) {
  assert(isScalarFormat(dtype) && "emitScalarWeight: not a scalar format");
  if (dtype == DType::F32)
    return reader.loadF32(b, loc, element, 0, 1);
  Value bits = reader.loadU16(b, loc, element, 0, 1);
  if (dtype == DType::F16)
    return extendFloat(b, loc, b.getF32Type(),
                       b.create<arith::BitcastOp>(loc, b.getF16Type(), bits));
  Value wide = b.create<arith::ExtUIOp>(loc, b.getI32Type(), bits);
  Value shifted = b.create<arith::ShLIOp>(loc, wide, intConstant(b, loc, b.getI32Type(), 16));
  return b.create<arith::BitcastOp>(loc, b.getF32Type(), shifted);
}

} // namespace sinter::codegen
