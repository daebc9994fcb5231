// SpirvEmitter.cpp - the emitter's index arithmetic, memory, loops and subgroup reductions, and
// the word-based byte reader the dequantizers read weights through.
#include "codegen/spirv/SpirvEmitter.h"

#include <cassert>

#include "codegen/ElementwiseMath.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace sinter::codegen::spv {

using mlir::Value;
namespace arith = mlir::arith;
namespace gpu = mlir::gpu;

Value Emitter::ci(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
Value Emitter::c32(int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, 32); }
Value Emitter::cf(double v) { return floatConstant(b, loc, f32(), v); }

Value Emitter::memberInt(int m, const OpShape &op, int i) {
  if (op.isStatic(i))
    return ci(op.ints[i]);
  uint32_t word = plan.wordBase[memberIndex(m)] + i;
  assert(word < plan.pushConstantWords && "integer argument without a word");
  int pushConstants = static_cast<int>(plan.bindings.size());
  return toIndex(load(func_.getArgument(pushConstants), ci(word)));
}

Value Emitter::functionArray(mlir::Type element, int64_t n) {
  auto type = mlir::MemRefType::get(
      {n}, element, mlir::AffineMap(),
      mlir::spirv::StorageClassAttr::get(b.getContext(), mlir::spirv::StorageClass::Function));
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&func_.getBody().front());
  return b.create<mlir::memref::AllocaOp>(loc, type);
}

Value Emitter::pushWord(uint32_t word) {
  assert(word < plan.pushConstantWords && "push-constant word out of range");
  int pushConstants = static_cast<int>(plan.bindings.size());
  return toIndex(load(func_.getArgument(pushConstants), ci(word)));
}

Value Emitter::add(Value a, Value c) { return b.create<arith::AddIOp>(loc, a, c); }
Value Emitter::sub(Value a, Value c) { return b.create<arith::SubIOp>(loc, a, c); }
Value Emitter::mul(Value a, Value c) { return b.create<arith::MulIOp>(loc, a, c); }
Value Emitter::divu(Value a, Value c) { return b.create<arith::DivUIOp>(loc, a, c); }
Value Emitter::remu(Value a, Value c) { return b.create<arith::RemUIOp>(loc, a, c); }
Value Emitter::minu(Value a, Value c) { return b.create<arith::MinUIOp>(loc, a, c); }
Value Emitter::ult(Value a, Value c) {
  return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, a, c);
}
Value Emitter::toIndex(Value v) { return b.create<arith::IndexCastUIOp>(loc, b.getIndexType(), v); }
Value Emitter::toI32(Value v) { return b.create<arith::IndexCastUIOp>(loc, i32(), v); }

Value Emitter::fadd(Value a, Value c) { return b.create<arith::AddFOp>(loc, a, c); }
Value Emitter::fmul(Value a, Value c) { return b.create<arith::MulFOp>(loc, a, c); }
Value Emitter::fma(Value a, Value x, Value c) { return emitFma(b, loc, a, x, c); }
Value Emitter::select(Value cond, Value a, Value c) {
  return b.create<arith::SelectOp>(loc, cond, a, c);
}

Value Emitter::threadId() { return b.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x); }

Value Emitter::groupId() {
  Value x = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  Value y = b.create<gpu::BlockIdOp>(loc, gpu::Dimension::y);
  Value nx = b.create<gpu::GridDimOp>(loc, gpu::Dimension::x);
  Value linear = add(mul(y, nx), x);
  return groupBase_ ? sub(linear, groupBase_) : linear;
}

void Emitter::beginSegment(int from, int shift, Value base) {
  shiftFrom_ = from;
  shift_ = shift;
  groupBase_ = base;
  for (SharedArray &a : sharedArrays_)
    a.taken = false;
}

void Emitter::endSegment() {
  shiftFrom_ = shift_ = 0;
  groupBase_ = Value();
}

Value Emitter::workgroupArray(mlir::Type element, int64_t n) {
  auto type = mlir::MemRefType::get(
      {n}, element, mlir::AffineMap(),
      mlir::spirv::StorageClassAttr::get(b.getContext(), mlir::spirv::StorageClass::Workgroup));
  for (SharedArray &a : sharedArrays_)
    if (!a.taken && a.type == type) {
      a.taken = true;
      return a.value;
    }
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&func_.getBody().front());
  Value array = b.create<mlir::memref::AllocOp>(loc, type).getResult();
  sharedArrays_.push_back({type, array, true});
  return array;
}

// Subgroup k of a 1-D workgroup whose size is a multiple of S is invocations [k S, k S + S): so
// it is on every implementation, and the runtime requests full subgroups of exactly S lanes.
// (MLIR 19 cannot lower gpu.lane_id, and mixing the builtins with this rule would be worse.)
Value Emitter::subgroupId() { return divu(threadId(), ci(target.subgroupSize)); }

Value Emitter::laneId() { return remu(threadId(), ci(target.subgroupSize)); }

void Emitter::barrier() {
  // gpu.barrier orders workgroup memory only; the copy kernel needs buffer writes visible too.
  auto semantics = mlir::spirv::MemorySemantics::AcquireRelease |
                   mlir::spirv::MemorySemantics::UniformMemory |
                   mlir::spirv::MemorySemantics::WorkgroupMemory;
  b.create<mlir::spirv::ControlBarrierOp>(loc, mlir::spirv::Scope::Workgroup,
                                          mlir::spirv::Scope::Workgroup, semantics);
}

Value Emitter::load(Value memref, Value index) {
  return b.create<mlir::memref::LoadOp>(loc, memref, mlir::ValueRange{index});
}

void Emitter::store(Value value, Value memref, Value index) {
  b.create<mlir::memref::StoreOp>(loc, value, memref, mlir::ValueRange{index});
}

// Loop-carried values live in Function variables, not in scf.for results: MLIR 19's SCF -> SPIR-V
// lowering stores the results only inside the body, so a loop that runs zero times (a lane with
// no block of a short row) would yield an undefined value. spirv-opt turns the variables back
// into registers.
llvm::SmallVector<Value> Emitter::forLoop(Value lb, Value ub, Value step, mlir::ValueRange inits,
                                          LoopBody body) {
  llvm::SmallVector<Value> vars;
  for (Value init : inits) {
    auto type = mlir::MemRefType::get(
        {1}, init.getType(), mlir::AffineMap(),
        mlir::spirv::StorageClassAttr::get(b.getContext(), mlir::spirv::StorageClass::Function));
    {
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&func_.getBody().front());
      vars.push_back(b.create<mlir::memref::AllocaOp>(loc, type));
    }
    store(init, vars.back(), ci(0));
  }
  auto loop = b.create<mlir::scf::ForOp>(loc, lb, ub, step);
  {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    llvm::SmallVector<Value> iters;
    for (Value var : vars)
      iters.push_back(load(var, ci(0)));
    llvm::SmallVector<Value> next = body(loop.getInductionVar(), iters);
    assert(next.size() == vars.size() && "a loop body yields one value per init");
    for (size_t i = 0; i < vars.size(); ++i)
      store(next[i], vars[i], ci(0));
  }
  llvm::SmallVector<Value> results;
  for (Value var : vars)
    results.push_back(load(var, ci(0)));
  return results;
}

void Emitter::forLoop(Value lb, Value ub, Value step, llvm::function_ref<void(Value iv)> body) {
  forLoop(lb, ub, step, mlir::ValueRange{}, [&](Value iv, mlir::ValueRange) {
    body(iv);
    return llvm::SmallVector<Value>{};
  });
}

void Emitter::ifThen(Value cond, llvm::function_ref<void()> body) {
  auto ifOp = b.create<mlir::scf::IfOp>(loc, cond, /*withElseRegion=*/false);
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  body();
}

void Emitter::ifElse(Value cond, llvm::function_ref<void()> then,
                     llvm::function_ref<void()> otherwise) {
  auto ifOp = b.create<mlir::scf::IfOp>(loc, cond, /*withElseRegion=*/true);
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  then();
  b.setInsertionPoint(ifOp.elseBlock()->getTerminator());
  otherwise();
}

Value Emitter::ifValue(Value cond, mlir::Type type, llvm::function_ref<Value()> then,
                       llvm::function_ref<Value()> otherwise) {
  auto ifOp = b.create<mlir::scf::IfOp>(loc, mlir::TypeRange{type}, cond, /*withElseRegion=*/true);
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  b.create<mlir::scf::YieldOp>(loc, then());
  b.setInsertionPointToStart(ifOp.elseBlock());
  b.create<mlir::scf::YieldOp>(loc, otherwise());
  return ifOp.getResult(0);
}

namespace {

Value clusterReduce(Emitter &e, Value v, uint32_t lanes, bool isMax) {
  if (lanes <= 1)
    return v;
  if (lanes == e.target.subgroupSize) {
    auto kind = isMax ? gpu::AllReduceOperation::MAXNUMF : gpu::AllReduceOperation::ADD;
    return e.b.create<gpu::SubgroupReduceOp>(e.loc, v, kind, /*uniform=*/false);
  }
  Value width = e.c32(e.target.subgroupSize);
  for (uint32_t offset = lanes / 2; offset >= 1; offset /= 2) {
    auto shuffle =
        e.b.create<gpu::ShuffleOp>(e.loc, v, e.c32(offset), width, gpu::ShuffleMode::XOR);
    v = isMax ? Value(e.b.create<arith::MaxNumFOp>(e.loc, v, shuffle.getShuffleResult()))
              : e.fadd(v, shuffle.getShuffleResult());
  }
  return v;
}

} // namespace

Value Emitter::clusterSum(Value v, uint32_t lanes) { return clusterReduce(*this, v, lanes, false); }
Value Emitter::clusterMax(Value v, uint32_t lanes) { return clusterReduce(*this, v, lanes, true); }

// WordReader ---------------------------------------------------------------------------------

Value WordReader::alignedWord(Value block, int64_t i) {
  if (block != block_) {
    block_ = block;
    raw_.clear();
    aligned_.clear();
    wordIndex_ = e_.divu(block, e_.ci(4));
    shift_ = alignment_ % 4 == 0 ? Value() : e_.toI32(e_.mul(e_.remu(block, e_.ci(4)), e_.ci(8)));
  }
  auto cached = aligned_.find(i);
  if (cached != aligned_.end())
    return cached->second;
  auto raw = [&](int64_t j) {
    auto it = raw_.find(j);
    if (it != raw_.end())
      return it->second;
    Value w = e_.load(words_, e_.add(wordIndex_, e_.ci(j)));
    raw_[j] = w;
    return w;
  };
  Value word = raw(i);
  if (shift_) {
    // (w[i] >> s) | (w[i + 1] << (32 - s)), written so that s = 0 shifts by at most 31.
    mlir::OpBuilder &b = e_.b;
    Value low = b.create<arith::ShRUIOp>(e_.loc, word, shift_);
    Value up = b.create<arith::ShLIOp>(e_.loc, raw(i + 1),
                                       b.create<arith::SubIOp>(e_.loc, e_.c32(31), shift_));
    up = b.create<arith::ShLIOp>(e_.loc, up, e_.c32(1));
    word = b.create<arith::OrIOp>(e_.loc, low, up);
  }
  aligned_[i] = word;
  return word;
}

Value WordReader::field(Value block, int64_t byte, int64_t bits) {
  mlir::OpBuilder &b = e_.b;
  byte += offset_;
  int64_t shift = 8 * (byte % 4);
  Value word = alignedWord(block, byte / 4);
  if (shift + bits > 32) { // straddles two words (a u32 at an offset that is not a multiple of 4)
    Value next = alignedWord(block, byte / 4 + 1);
    Value low = b.create<arith::ShRUIOp>(e_.loc, word, e_.c32(shift));
    Value high = b.create<arith::ShLIOp>(e_.loc, next, e_.c32(32 - shift));
    return b.create<arith::OrIOp>(e_.loc, low, high);
  }
  if (shift == 0)
    return word;
  return b.create<arith::ShRUIOp>(e_.loc, word, e_.c32(shift));
}

namespace {

Value fromLanes(mlir::OpBuilder &b, mlir::Location loc, mlir::Type element,
                llvm::ArrayRef<Value> lanes) {
  if (lanes.size() == 1)
    return lanes[0];
  auto type = mlir::VectorType::get({static_cast<int64_t>(lanes.size())}, element);
  return b.create<mlir::vector::FromElementsOp>(loc, type, lanes);
}

} // namespace

Value WordReader::loadBytes(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset,
                            int64_t count) {
  llvm::SmallVector<Value, 32> lanes;
  for (int64_t k = 0; k < count; ++k)
    lanes.push_back(b.create<arith::TruncIOp>(loc, b.getI8Type(), field(block, offset + k, 8)));
  return fromLanes(b, loc, b.getI8Type(), lanes);
}

Value WordReader::loadU16(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset,
                          int64_t count) {
  llvm::SmallVector<Value, 32> lanes;
  for (int64_t k = 0; k < count; ++k)
    lanes.push_back(
        b.create<arith::TruncIOp>(loc, b.getI16Type(), field(block, offset + 2 * k, 16)));
  return fromLanes(b, loc, b.getI16Type(), lanes);
}

Value WordReader::loadU32(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset) {
  return field(block, offset, 32);
}

Value WordReader::loadF32(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset,
                          int64_t count) {
  llvm::SmallVector<Value, 32> lanes;
  for (int64_t k = 0; k < count; ++k)
    lanes.push_back(
        b.create<arith::BitcastOp>(loc, b.getF32Type(), field(block, offset + 4 * k, 32)));
  return fromLanes(b, loc, b.getF32Type(), lanes);
}

} // namespace sinter::codegen::spv
