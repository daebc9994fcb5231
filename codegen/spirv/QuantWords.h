// QuantWords.h - the pieces of the SPIR-V quantized_matmul kernels (internal to codegen/spirv/).
//
// x read as vec4s (with an rms_norm prologue's weight), the fast Q4_0/Q8_0 decoder (quants OR-ed
// into the bits of 2^23), the split schedule's word loads, and int8 x with integer dot products.
// QMatmulKernels.cpp puts them together into schedules.
#ifndef SINTER_CODEGEN_SPIRV_QUANTWORDS_H
#define SINTER_CODEGEN_SPIRV_QUANTWORDS_H

#include <array>
#include <cstdint>
#include <map>

#include "codegen/spirv/SpirvEmitter.h"

namespace sinter::codegen::spv {

using mlir::Value;

/// The largest of 4, 2, 1 dividing `bytes`.
int64_t alignmentOf(int64_t bytes);

/// Lane `lane` of a vec4.
Value extractLane(Emitter &e, Value v, int64_t lane);

/// Element `i` of a vec4 binding.
Value vec4Element(Emitter &e, Value v4, Value i);

/// Where a quantized_matmul reads x: the vec4 binding x4 (the rms_norm prologue's input when
/// there is one; its weight g4 then multiplies x, null without a prologue) and, in the norm's
/// rescue pass (ElementwiseMath.h), the power of two that every x is scaled by, exactly.
struct XSource {
  Value x4, g4;
  Value exponent; ///< i32 j of the rescue; null on the f32 fast path
  /// vec4 `index` of x (times 2^j in the rescue).
  Value load(Emitter &e, Value index) const;
  /// Element `i` of x (times 2^j in the rescue).
  Value at(Emitter &e, Value i) const;
};

/// The x of one group of a row, 4 floats per vector: x itself, and x * g when an rms_norm
/// prologue with weight g feeds the product (the norm's 1 / rms is applied to the row's sum).
struct GroupInput {
  llvm::SmallVector<Value, 8> x;  ///< what multiplies the weights
  llvm::SmallVector<Value, 8> in; ///< the norm's input, for the sum of squares (norm only)
};

GroupInput loadGroupInput(Emitter &e, const XSource &xs, Value first, int64_t weights);

/// Σ_i q[i] * x[i] over a group.
Value groupDot(Emitter &e, Value q, const GroupInput &gi);

/// Σ_i v[i]^2 (squares) or Σ_i v[i] over a group's vectors.
Value groupSum(Emitter &e, llvm::ArrayRef<Value> vectors, bool squares);

// The fast decoders of the legacy 2-byte-aligned formats (Q4_0, Q8_0) read a pair of blocks as
// aligned words (the pair starts at a multiple of 4 bytes) and turn each quant into a float
// without a conversion instruction: OR-ing a field at bit b (< 2^23 when set at b) into the
// exponent of 2^23 gives the float 2^23 + 2^b q exactly, and subtracting 2^23 + 2^b z leaves
// 2^b (q - z). A block's products are summed per b and rescaled by 2^-b once per block, so each
// weight costs an AND-OR, a subtract and an FMA (the generic decoder spends about 9 operations).

/// An fp16 held in the low 16 bits of an i32 (the rest zero), widened to f32 exactly.
Value halfBitsToF32(Emitter &e, Value bits16);

/// A Q4_0 or Q8_0 block of a pair: its scale and quant words.
struct PairBlock {
  Value scale;                       ///< d, as f32
  llvm::SmallVector<Value, 8> words; ///< the block's quants, 4 bytes per i32, in order
};

/// Blocks 0 and 1 of the pair at word `wordBase`: {d f16, qs[Q bytes]} twice, the second block
/// starting at byte B (B % 4 == 2).
std::array<PairBlock, 2> loadPair(Emitter &e, Value w, Value wordBase, DType dtype);

/// Adds Σ (q_i - z) x_i over one u32 of quants to `sums` (kept per bit position b, scaled by
/// 2^b): a Q4_0 word holds bytes 4k..4k+3 of a block, whose low nibbles are weights 4k.. (x in
/// `lo`) and high nibbles 16 + 4k.. (`hi`); a Q8_0 word holds weights 4k..4k+3 (`lo`).
void accumulateWord(Emitter &e, DType dtype, Value word, Value lo, Value hi,
                    std::map<int64_t, Value> &sums);

/// Σ_b 2^-b sums[b]: the dot product of the words accumulated, without the block's scale.
Value combineSums(Emitter &e, const std::map<int64_t, Value> &sums);

/// Σ_i (q_i - z) x_i over one Q4_0 or Q8_0 block (x as 8 vec4s), without its scale.
Value fastBlockDot(Emitter &e, DType dtype, llvm::ArrayRef<Value> words, llvm::ArrayRef<Value> x);

/// One block of the split schedule in each of a lane's rows: the u32 holding the block's f16 d
/// (at bit dShift) and the two u32s its quant word is cut from (at bit shift).
struct SplitWords {
  llvm::SmallVector<Value, 8> dRaw, lo, hi, dShift, shift;
};

/// Loads quant word `word` of block `blk` of each row (byte offsets rowBases, u32 offsets
/// rowWords). When rows start at 4-byte boundaries (static n_cols, even block count) the shifts
/// are the same for every row and a row adds only its base.
SplitWords loadSplitWords(Emitter &e, Value w, DType dtype, Value blk, Value word,
                          llvm::ArrayRef<Value> rowBases, llvm::ArrayRef<Value> rowWords,
                          bool alignedRows);
/// The same with row r read from rowW[r] (a sibling product's rows from its own matrix).
SplitWords loadSplitWords(Emitter &e, llvm::ArrayRef<Value> rowW, DType dtype, Value blk,
                          Value word, llvm::ArrayRef<Value> rowBases,
                          llvm::ArrayRef<Value> rowWords, bool alignedRows);

/// The int8-x schedule's lane: `count` consecutive quant words of block `blk` of each row from
/// word `word` on, as count + 1 aligned u32s per row (each quant word cut from two of them at bit
/// `shift`), and the u32 holding the block's f16 d (at bit dShift). count 1 is SplitWords.
/// With `window` (a whole block a lane: word 0, count the block's quant words) the count + 1
/// words from the one holding the block's first byte hold d as well, and no word of its own is
/// loaded for it: d is word 0's low half at an even block start (byte % 4 == 0), its high half
/// otherwise, and quant word k is then cut from words k and k + 1 at bit 16 (even) or is word
/// k + 1 (odd); `odd` keeps which, per row.
struct LaneWords {
  llvm::SmallVector<Value, 8> dRaw, dShift, shift, odd;
  llvm::SmallVector<llvm::SmallVector<Value, 9>, 8> raw; ///< per row, count + 1 words
};
LaneWords loadLaneWords(Emitter &e, llvm::ArrayRef<Value> rowW, DType dtype, Value blk, Value word,
                        int64_t count, llvm::ArrayRef<Value> rowBases,
                        llvm::ArrayRef<Value> rowWords, bool alignedRows, bool window = false);

/// Quant word k of row r of a LaneWords.
Value laneQuantWord(Emitter &e, const LaneWords &l, size_t r, int64_t k);

/// Row r's block scale d, as f32, from the u32 holding it and its bit offset.
Value scaleFromWord(Emitter &e, Value raw, Value shift);

/// The quant word cut from `lo` and `hi` at bit `shift` (0 or 16): a funnel shift ((hi << 16)
/// << (16 - s) is 0 when s == 0).
Value funnelWord(Emitter &e, Value lo, Value hi, Value shift);

/// Row r's block scale d, as f32.
Value splitScale(Emitter &e, const SplitWords &l, size_t r);

/// Row r's quant word: a funnel shift of its two words ((hi << 16) << (16 - s) is 0 when s == 0).
Value splitQuantWord(Emitter &e, const SplitWords &l, size_t r);

/// One block of 32 of x as int8 (SEMANTICS.md's quantized activations), from the vec4s of it this
/// lane holds, the block spread over `lanes` aligned lanes of the subgroup: d_x = max |x| / 127,
/// q = round(x / d_x) four to a u32 per vec4 and, with `sum`, Σ q over the block (Q4_0's zero
/// point). Every lane of the block gets d_x and the sum.
struct Int8Block {
  llvm::SmallVector<Value, 2> words;
  Value dx, qsum;
};
Int8Block quantizeBlockX(Emitter &e, llvm::ArrayRef<Value> vec4s, uint32_t lanes, bool sum);

/// Σ q_w q_x over one quant word of W and the int8 x it covers: a Q4_0 word's low nibbles against
/// `xa` and high nibbles against `xb` (unsigned 4x8 vectors, OpSUDot), a Q8_0 word against `xa`
/// (OpSDot).
Value int8WordDot(Emitter &e, DType dtype, Value q, Value xa, Value xb);

} // namespace sinter::codegen::spv

#endif // SINTER_CODEGEN_SPIRV_QUANTWORDS_H
