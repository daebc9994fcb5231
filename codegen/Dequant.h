// Dequant.h - the GGUF weight formats as MLIR-emitting helpers (internal to codegen/).
//
// Every dequantizing kernel (the CPU matrix-vector products now, the SPIR-V ones later) decodes
// weights through these functions, so each block layout is written once. A block is split into
// groups that share one scale: group g of a block holds the weights w[i] = q[i] * scale + bias,
// which lets a dot product multiply by the scale once per group instead of once per weight. The
// memory itself is reached through a ByteReader, which each target implements (LLVM pointers on
// the CPU, 32-bit storage-buffer words in SPIR-V).
#ifndef SINTER_CODEGEN_DEQUANT_H
#define SINTER_CODEGEN_DEQUANT_H

#include <cstdint>

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "sinter/DType.h"

namespace sinter::codegen {

/// Loads little-endian data at constant byte offsets from a block base. `count` > 1 gives a
/// vector of that many elements, `count` == 1 a scalar.
class ByteReader {
public:
  virtual ~ByteReader();
  /// Bytes as i8 / vector<count x i8>.
  virtual mlir::Value loadBytes(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block,
                                int64_t offset, int64_t count) = 0;
  /// 16-bit words as i16 / vector<count x i16>.
  virtual mlir::Value loadU16(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block,
                              int64_t offset, int64_t count) = 0;
  /// One 32-bit word as i32.
  virtual mlir::Value loadU32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block,
                              int64_t offset) = 0;
  /// Floats as f32 / vector<count x f32>.
  virtual mlir::Value loadF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value block,
                              int64_t offset, int64_t count) = 0;
};

/// How a format is cut into groups. The scalar formats (F32, F16, BF16) are read in pseudo-blocks
/// of kScalarBlock weights (one group, no scale); a row's remainder uses emitScalarWeight.
struct QuantLayout {
  int64_t blockWeights;
  int64_t blockBytes;
  int64_t groupWeights;
  bool hasScale; ///< false for the scalar formats: w = q
  bool hasBias;  ///< the affine formats (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K)
  int64_t groupsPerBlock() const { return blockWeights / groupWeights; }
};

/// Weights per pseudo-block of the scalar formats.
inline constexpr int64_t kScalarBlock = 32;

/// True for F32, F16 and BF16.
bool isScalarFormat(DType dtype);

/// The layout of a Supported dtype (asserts on others).
QuantLayout quantLayout(DType dtype);

/// One group of weights: w[i] = q[i] * scale + bias. `q` is vector<groupWeights x f32>; scale
/// and bias are f32 scalars, null where the format has none (scale 1, bias 0).
struct WeightGroup {
  mlir::Value q;
  mlir::Value scale;
  mlir::Value bias;
};

/// Emits the decoding of group `group` (0 <= group < groupsPerBlock) of the block at `block`.
WeightGroup emitWeightGroup(mlir::OpBuilder &b, mlir::Location loc, ByteReader &reader, DType dtype,
                            mlir::Value block, int64_t group);

/// The group's weights as vector<groupWeights x f32>, fully dequantized (q * scale + bias, with
/// the products in ggml's order so the values are bit-exact).
mlir::Value emitDequantizedGroup(mlir::OpBuilder &b, mlir::Location loc, ByteReader &reader,
                                 DType dtype, mlir::Value block, int64_t group);

/// One weight of a scalar format stored at byte 0 of `element`, as f32.
mlir::Value emitScalarWeight(mlir::OpBuilder &b, mlir::Location loc, ByteReader &reader,
                             DType dtype, mlir::Value element);

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_DEQUANT_H
