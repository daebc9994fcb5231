// CpuEmitter.cpp - the emitter's memory, loop and arithmetic helpers, and the kernel function.
//
// Every kernel is a func.func with the C signature of KernelFn; its body comes from the builder
// of the anchor's class (PointwiseKernels.cpp, ContractionKernels.cpp).
#include "codegen/llvm/CpuEmitter.h"

#include "absl/strings/str_cat.h"
#include "codegen/ElementwiseMath.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace sinter::codegen::cpu {

using mlir::Value;
namespace arith = mlir::arith;
namespace LLVM = mlir::LLVM;

mlir::Type Emitter::ptrType() { return LLVM::LLVMPointerType::get(b.getContext()); }

Value Emitter::c64(int64_t v) { return b.create<arith::ConstantIntOp>(loc, v, 64); }

Value Emitter::cf32(double v) { return floatConstant(b, loc, f32(), v); }

Value Emitter::zeros(int64_t lanes) {
  return floatConstant(b, loc, lanes ? mlir::Type(vecF32(lanes)) : f32(), 0.0);
}

Value Emitter::buffer(int i) {
  int index = 3 * member_ + i;
  for (const auto &[operand, address] : overrides_)
    if (operand == index)
      return address;
  Value slot = b.create<LLVM::GEPOp>(loc, ptrType(), ptrType(), buffers_,
                                     llvm::ArrayRef<LLVM::GEPArg>{index});
  return b.create<LLVM::LoadOp>(loc, ptrType(), slot, /*alignment=*/8);
}

Value Emitter::intArg(const OpShape &shape, int i) {
  if (shape.isStatic(i))
    return c64(shape.ints[i]);
  Value slot = b.create<LLVM::GEPOp>(loc, ptrType(), i64(), ints_,
                                     llvm::ArrayRef<LLVM::GEPArg>{5 * member_ + i});
  return b.create<LLVM::LoadOp>(loc, i64(), slot, /*alignment=*/8);
}

Value Emitter::add(Value a, Value c) { return b.create<arith::AddIOp>(loc, a, c); }
Value Emitter::sub(Value a, Value c) { return b.create<arith::SubIOp>(loc, a, c); }
Value Emitter::mul(Value a, Value c) { return b.create<arith::MulIOp>(loc, a, c); }
Value Emitter::divui(Value a, Value c) { return b.create<arith::DivUIOp>(loc, a, c); }
Value Emitter::remui(Value a, Value c) { return b.create<arith::RemUIOp>(loc, a, c); }
Value Emitter::minsi(Value a, Value c) { return b.create<arith::MinSIOp>(loc, a, c); }
Value Emitter::roundDown(Value a, int64_t m) { return sub(a, remui(a, c64(m))); }

Value Emitter::fadd(Value a, Value c) { return b.create<arith::AddFOp>(loc, a, c); }
Value Emitter::fmul(Value a, Value c) { return b.create<arith::MulFOp>(loc, a, c); }
Value Emitter::fma(Value a, Value x, Value c) { return emitFma(b, loc, a, x, c); }

Value Emitter::reduceAdd(Value v) {
  return b.create<mlir::vector::ReductionOp>(loc, mlir::vector::CombiningKind::ADD, v);
}

Value Emitter::reduceMax(Value v) {
  return b.create<mlir::vector::ReductionOp>(loc, mlir::vector::CombiningKind::MAXNUMF, v);
}

Value Emitter::gepBytes(Value base, Value bytes) {
  return b.create<LLVM::GEPOp>(loc, ptrType(), b.getI8Type(), base, mlir::ValueRange{bytes});
}

Value Emitter::gepF32(Value base, Value index) {
  return b.create<LLVM::GEPOp>(loc, ptrType(), f32(), base, mlir::ValueRange{index});
}

Value Emitter::loadF32(Value base, Value index, int64_t lanes) {
  mlir::Type type = lanes ? mlir::Type(vecF32(lanes)) : f32();
  return b.create<LLVM::LoadOp>(loc, type, gepF32(base, index), /*alignment=*/1);
}

void Emitter::storeF32(Value base, Value index, Value value) {
  b.create<LLVM::StoreOp>(loc, value, gepF32(base, index), /*alignment=*/1);
}

llvm::SmallVector<Value> Emitter::forLoop(Value lb, Value ub, int64_t step, mlir::ValueRange inits,
                                          LoopBody body) {
  auto loop = b.create<mlir::scf::ForOp>(
      loc, lb, ub, c64(step), inits,
      [&](mlir::OpBuilder &nested, mlir::Location, Value iv, mlir::ValueRange iters) {
        mlir::OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nested.getInsertionBlock(), nested.getInsertionPoint());
        llvm::SmallVector<Value> next = body(iv, iters);
        b.create<mlir::scf::YieldOp>(loc, next);
      });
  return llvm::SmallVector<Value>(loop.getResults());
}

void Emitter::forLoop(Value lb, Value ub, int64_t step, llvm::function_ref<void(Value iv)> body) {
  forLoop(lb, ub, step, mlir::ValueRange{}, [&](Value iv, mlir::ValueRange) {
    body(iv);
    return llvm::SmallVector<Value>{};
  });
}

namespace {

Value bytePtr(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset) {
  if (offset == 0)
    return block;
  auto ptr = LLVM::LLVMPointerType::get(b.getContext());
  return b.create<LLVM::GEPOp>(loc, ptr, b.getI8Type(), block,
                               llvm::ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(offset)});
}

mlir::Type maybeVector(mlir::Type element, int64_t count) {
  if (count == 1)
    return element;
  return mlir::VectorType::get({count}, element);
}

} // namespace

Value PtrByteReader::loadBytes(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset,
                               int64_t count) {
  return b.create<LLVM::LoadOp>(loc, maybeVector(b.getI8Type(), count),
                                bytePtr(b, loc, block, offset), /*alignment=*/1);
}

Value PtrByteReader::loadU16(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset,
                             int64_t count) {
  return b.create<LLVM::LoadOp>(loc, maybeVector(b.getI16Type(), count),
                                bytePtr(b, loc, block, offset), /*alignment=*/1);
}

Value PtrByteReader::loadU32(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset) {
  return b.create<LLVM::LoadOp>(loc, b.getI32Type(), bytePtr(b, loc, block, offset),
                                /*alignment=*/1);
}

Value PtrByteReader::loadF32(mlir::OpBuilder &b, mlir::Location loc, Value block, int64_t offset,
                             int64_t count) {
  return b.create<LLVM::LoadOp>(loc, maybeVector(b.getF32Type(), count),
                                bytePtr(b, loc, block, offset), /*alignment=*/1);
}

namespace {

bool isContraction(OpKind kind) {
  return kind == OpKind::Matmul || kind == OpKind::QuantizedMatmul || kind == OpKind::AttnScore ||
         kind == OpKind::AttnValue;
}

} // namespace

// The largest n_cols a fused rms_norm prologue keeps on the stack (64 KB of x).
constexpr int64_t kMaxPrologueCols = 16384;

absl::Status checkFused(const KernelSpec &spec) {
  auto unsupported = [&](const std::string &why) {
    return absl::UnimplementedError(
        absl::StrCat("kernel ", spec.name(), ": no fused cpu kernel for ", why));
  };
  if (spec.attentionOverHeads)
    return unsupported("attention over heads (the cpu plan runs it as a loop over heads)");
  if (spec.anchor.kind != OpKind::QuantizedMatmul)
    return unsupported(absl::StrCat("a ", opInfo(spec.anchor.kind).name, " anchor"));
  if (spec.prologue.size() > 1 ||
      (spec.prologue.size() == 1 && spec.prologue[0].kind != OpKind::RmsNorm))
    return unsupported("a prologue other than one rms_norm");
  if (!spec.prologue.empty() && (!spec.anchor.isStatic(1) || spec.anchor.ints[1] <= 0 ||
                                 spec.anchor.ints[1] > kMaxPrologueCols))
    return unsupported("an rms_norm prologue without a static n_cols of at most 16384");
  if ((spec.unstoredOutputs & ~1u) != 0 || (spec.unstoredOutputs != 0 && spec.prologue.empty()))
    return unsupported("unstored outputs other than the rms_norm prologue's");
  for (const OpShape &s : spec.epilogue)
    if (!isElementwise(s.kind))
      return unsupported(absl::StrCat("a ", opInfo(s.kind).name, " epilogue"));
  return absl::OkStatus();
}

absl::Status buildKernel(mlir::ModuleOp module, const KernelSpec &spec, llvm::StringRef name,
                         bool int8Dot) {
  const bool fused = !spec.prologue.empty() || !spec.epilogue.empty() || spec.attentionOverHeads;
  if (fused)
    if (absl::Status s = checkFused(spec); !s.ok())
      return s;
  mlir::MLIRContext *context = module.getContext();
  mlir::OpBuilder b(context);
  b.setInsertionPointToEnd(module.getBody());
  mlir::Location loc = mlir::NameLoc::get(b.getStringAttr(name));
  auto ptr = LLVM::LLVMPointerType::get(context);
  auto type = b.getFunctionType({ptr, ptr, b.getI64Type(), b.getI64Type()}, {});
  auto func = b.create<mlir::func::FuncOp>(loc, name, type);
  mlir::Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Emitter e(b, loc, entry->getArgument(0), entry->getArgument(1));
  e.int8Dot = int8Dot;
  Value begin = entry->getArgument(2), end = entry->getArgument(3);
  absl::Status status = absl::OkStatus();
  if (!spec.prologue.empty()) {
    // The normalized x on the stack; the first range's call also stores it.
    const int64_t cols = spec.anchor.ints[1];
    Value x = b.create<LLVM::AllocaOp>(loc, e.ptrType(), e.f32(), e.c64(cols), 64);
    e.setMember(0);
    emitRmsNormRow(e, spec.prologue[0], x);
    if ((spec.unstoredOutputs & 1) == 0) {
      Value first = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, begin, e.c64(0));
      auto ifOp = b.create<mlir::scf::IfOp>(loc, first, /*withElseRegion=*/false);
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      b.create<LLVM::MemcpyOp>(loc, e.buffer(2), x, e.c64(cols * 4), /*isVolatile=*/false);
    }
    e.setMember(1);
    e.overrideBuffer(1, x);
  }
  status = isContraction(spec.anchor.kind) ? emitContractionKernel(e, spec.anchor, begin, end)
                                           : emitPointwiseKernel(e, spec.anchor, begin, end);
  for (size_t m = 0; status.ok() && m < spec.epilogue.size(); ++m) {
    e.setMember(static_cast<int>(spec.prologue.size() + 1 + m));
    status = emitPointwiseKernel(e, spec.epilogue[m], begin, end);
  }
  if (!status.ok()) {
    func.erase();
    return status;
  }
  // The test hook's deliberate error: a void function returning a value fails verification.
  if (spec.injectFailure)
    b.create<mlir::func::ReturnOp>(loc, mlir::ValueRange{begin});
  else
    b.create<mlir::func::ReturnOp>(loc);
  return absl::OkStatus();
}

} // namespace sinter::codegen::cpu
