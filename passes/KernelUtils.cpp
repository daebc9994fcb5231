// KernelUtils.cpp - outlining runs of ops into sinter.kernel regions, and version queries.
#include "passes/KernelUtils.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace sinter::passes {

mlir::Operation *nextOp(mlir::Operation *op) {
  for (mlir::Operation *n = op->getNextNode(); n; n = n->getNextNode())
    if (!mlir::isa<mlir::arith::ConstantOp>(n))
      return n;
  return nullptr;
}

mlir::Operation *prevOp(mlir::Operation *op) {
  for (mlir::Operation *p = op->getPrevNode(); p; p = p->getPrevNode())
    if (!mlir::isa<mlir::arith::ConstantOp>(p))
      return p;
  return nullptr;
}

void hoistConstants(mlir::func::FuncOp func) {
  mlir::Block &entry = func.getBody().front();
  llvm::SmallVector<mlir::Operation *> constants;
  for (mlir::Operation &op : entry)
    if (mlir::isa<mlir::arith::ConstantOp>(op))
      constants.push_back(&op);
  mlir::Operation *insertBefore = &entry.front();
  // Keep their relative order: move each after the previous one.
  for (mlir::Operation *c : constants) {
    if (c != insertBefore)
      c->moveBefore(insertBefore);
    else
      insertBefore = c->getNextNode();
  }
}

llvm::SmallVector<mlir::Operation *> membersOf(mlir::Operation *op) {
  llvm::SmallVector<mlir::Operation *> members;
  auto kernel = mlir::dyn_cast<KernelOp>(op);
  if (!kernel) {
    members.push_back(op);
    return members;
  }
  for (mlir::Operation &inner : kernel.getBodyBlock())
    if (!mlir::isa<mlir::arith::ConstantOp, YieldOp>(inner))
      members.push_back(&inner);
  return members;
}

mlir::Operation *producerOf(mlir::Value v) {
  auto result = mlir::dyn_cast<mlir::OpResult>(v);
  if (!result)
    return nullptr;
  auto kernel = mlir::dyn_cast<KernelOp>(result.getOwner());
  if (!kernel)
    return result.getOwner();
  mlir::Value inner = kernel.getBodyBlock().getTerminator()->getOperand(result.getResultNumber());
  return inner.getDefiningOp();
}

bool producedBy(mlir::Operation *op, mlir::Value v) {
  auto result = mlir::dyn_cast<mlir::OpResult>(v);
  return result && result.getOwner() == op;
}

namespace {

// "rms_norm+qmatmulx3+rope", "(attn_score+softmax+attn_value)x8": member op names, with runs of
// one name counted and then repeated groups of names (one group a head, say) counted.
std::string kernelName(llvm::ArrayRef<mlir::Operation *> members) {
  // Runs of one name first.
  std::vector<std::string> tokens;
  for (size_t i = 0; i < members.size();) {
    llvm::StringRef opName = members[i]->getName().stripDialect();
    size_t j = i;
    while (j < members.size() && members[j]->getName().stripDialect() == opName)
      ++j;
    tokens.push_back(opName.str() + (j - i > 1 ? "x" + std::to_string(j - i) : ""));
    i = j;
  }
  // Then, at each position, the group of tokens repeated back to back the most often.
  std::string name;
  for (size_t i = 0; i < tokens.size();) {
    size_t bestLen = 1, bestRepeats = 1;
    for (size_t len = 2; i + 2 * len <= tokens.size(); ++len) {
      size_t repeats = 1;
      while (i + (repeats + 1) * len <= tokens.size() &&
             std::equal(tokens.begin() + i, tokens.begin() + i + len,
                        tokens.begin() + i + repeats * len))
        ++repeats;
      if (repeats > 1 && repeats * len > bestRepeats * bestLen) {
        bestLen = len;
        bestRepeats = repeats;
      }
    }
    if (!name.empty())
      name += "+";
    if (bestRepeats > 1) {
      std::string group;
      for (size_t k = i; k < i + bestLen; ++k)
        group += (k > i ? "+" : "") + tokens[k];
      name += "(" + group + ")x" + std::to_string(bestRepeats);
    } else {
      name += tokens[i];
    }
    i += bestLen * bestRepeats;
  }
  return name;
}

// Inlines a kernel's body before it and erases it; returns the inlined member ops.
llvm::SmallVector<mlir::Operation *> inlineKernel(KernelOp kernel,
                                                  llvm::SetVector<llvm::StringRef> &patterns) {
  for (mlir::Attribute p : kernel.getPatterns())
    patterns.insert(mlir::cast<mlir::StringAttr>(p).getValue());
  mlir::OpBuilder b(kernel);
  mlir::IRMapping map;
  for (auto [arg, input] : llvm::zip(kernel.getBodyBlock().getArguments(), kernel.getInputs()))
    map.map(arg, input);
  llvm::SmallVector<mlir::Operation *> inlined;
  for (mlir::Operation &inner : kernel.getBodyBlock()) {
    if (auto yield = mlir::dyn_cast<YieldOp>(inner)) {
      for (auto [result, value] : llvm::zip(kernel.getResults(), yield.getValues()))
        result.replaceAllUsesWith(map.lookup(value));
      break;
    }
    mlir::Operation *clone = b.clone(inner, map);
    if (!mlir::isa<mlir::arith::ConstantOp>(clone))
      inlined.push_back(clone);
  }
  kernel.erase();
  return inlined;
}

} // namespace

KernelOp formKernel(llvm::ArrayRef<mlir::Operation *> ops,
                    llvm::ArrayRef<llvm::StringRef> newPatterns) {
  assert(!ops.empty() && "formKernel of no ops");
  llvm::SetVector<llvm::StringRef> patterns;
  llvm::SmallVector<mlir::Operation *> members;
  for (mlir::Operation *op : ops) {
    if (auto kernel = mlir::dyn_cast<KernelOp>(op)) {
      auto inlined = inlineKernel(kernel, patterns);
      members.append(inlined.begin(), inlined.end());
      continue;
    }
    members.push_back(op);
  }
  for (llvm::StringRef p : newPatterns)
    patterns.insert(p);
  llvm::SmallPtrSet<mlir::Operation *, 16> inside(members.begin(), members.end());

  // Inputs: values defined outside the run (constants excluded: they are cloned inside).
  llvm::SetVector<mlir::Value> inputs;
  for (mlir::Operation *op : members)
    for (mlir::Value v : op->getOperands()) {
      mlir::Operation *def = v.getDefiningOp();
      if (def && (inside.contains(def) || mlir::isa<mlir::arith::ConstantOp>(def)))
        continue;
      inputs.insert(v);
    }
  // Results: values of the run used after it.
  llvm::SmallVector<mlir::Value> outputs;
  for (mlir::Operation *op : members)
    for (mlir::Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](mlir::Operation *u) { return !inside.contains(u); }))
        outputs.push_back(r);

  mlir::OpBuilder b(members.front());
  llvm::SmallVector<mlir::Type> resultTypes;
  for (mlir::Value v : outputs)
    resultTypes.push_back(v.getType());
  llvm::SmallVector<llvm::StringRef> patternList(patterns.begin(), patterns.end());
  auto kernel = b.create<KernelOp>(members.front()->getLoc(), resultTypes, inputs.getArrayRef(),
                                   kernelName(members), b.getStrArrayAttr(patternList));
  mlir::Block *body = b.createBlock(&kernel.getBody());
  mlir::IRMapping map;
  for (mlir::Value v : inputs)
    map.map(v, body->addArgument(v.getType(), v.getLoc()));
  b.setInsertionPointToStart(body);
  std::map<mlir::Operation *, mlir::Operation *> clonedConstants;
  for (mlir::Operation *op : members) {
    for (mlir::Value v : op->getOperands()) {
      auto c = v.getDefiningOp<mlir::arith::ConstantOp>();
      if (c && !map.contains(v))
        map.map(v, b.clone(*c)->getResult(0));
    }
    b.clone(*op, map);
  }
  llvm::SmallVector<mlir::Value> yielded;
  for (mlir::Value v : outputs)
    yielded.push_back(map.lookup(v));
  b.create<YieldOp>(kernel.getLoc(), yielded);

  for (auto [old, replacement] : llvm::zip(outputs, kernel.getResults()))
    old.replaceUsesWithIf(replacement,
                          [&](mlir::OpOperand &use) { return !inside.contains(use.getOwner()); });
  for (mlir::Operation *op : llvm::reverse(members)) {
    op->dropAllUses();
    op->erase();
  }
  return kernel;
}

KernelOp fuseAdjacent(mlir::Operation *first, mlir::Operation *second, llvm::StringRef pattern) {
  return formKernel({first, second}, {pattern});
}

llvm::SmallVector<unsigned> writtenOperands(mlir::Operation *op) {
  llvm::SmallVector<unsigned> written;
  if (mlir::isa<UploadOp>(op)) {
    written.push_back(0);
    return written;
  }
  std::optional<OpKind> kind = graphOpKind(op);
  if (!kind)
    return written;
  unsigned numBuffers = opInfo(*kind).numBuffers;
  unsigned numWritten = graphOpDesc(*kind).numWritten;
  for (unsigned i = numBuffers - numWritten; i < numBuffers; ++i)
    written.push_back(i);
  return written;
}

void readAttributes(mlir::Operation *op, OpCall &call) {
  const OpInfo &info = opInfo(call.kind);
  // The ODS attribute names are SEMANTICS.md's argument names, as in OpInfo.
  if (info.scalarName)
    if (auto f = op->getAttrOfType<mlir::FloatAttr>(info.scalarName))
      call.scalar = float(f.getValueAsDouble());
  if (info.hasDType)
    if (auto d = op->getAttrOfType<mlir::IntegerAttr>("dtype"))
      call.dtype = static_cast<DType>(d.getInt());
}

std::optional<OpCall> constantOpCall(mlir::Operation *op) {
  std::optional<OpKind> kind = graphOpKind(op);
  if (!kind)
    return std::nullopt;
  const OpInfo &info = opInfo(*kind);
  OpCall call;
  call.kind = *kind;
  for (unsigned i = 0; i < info.numBuffers; ++i)
    call.buffers[i] = BufferHandle{i + 1};
  for (unsigned i = 0; i < info.numInts; ++i) {
    llvm::APInt value;
    if (!mlir::matchPattern(op->getOperand(info.numBuffers + i), mlir::m_ConstantInt(&value)))
      return std::nullopt;
    call.ints[i] = value.getZExtValue();
  }
  readAttributes(op, call);
  return call;
}

bool isFullOverwriteDest(mlir::OpOperand &use) {
  mlir::Operation *op = use.getOwner();
  unsigned index = use.getOperandNumber();
  llvm::SmallVector<unsigned> written = writtenOperands(op);
  if (!llvm::is_contained(written, index))
    return false;
  uint64_t bytes = bufferBytes(use.get());
  if (auto upload = mlir::dyn_cast<UploadOp>(op)) {
    llvm::APInt size;
    return mlir::matchPattern(upload.getSize(), mlir::m_ConstantInt(&size)) &&
           size.getZExtValue() == bytes;
  }
  std::optional<OpCall> call = constantOpCall(op);
  if (!call)
    return false;
  absl::StatusOr<AccessList> accesses = opAccesses(*call);
  if (!accesses.ok())
    return false;
  for (const BufferAccess &a : *accesses)
    if (a.bufferIndex == index && a.write)
      return !a.read && a.offset == 0 && a.size == bytes;
  return false;
}

std::optional<int64_t> slotOf(mlir::Value v) {
  for (int guard = 0; guard < 1 << 20; ++guard) {
    if (auto arg = mlir::dyn_cast<mlir::BlockArgument>(v)) {
      mlir::Operation *parent = arg.getOwner()->getParentOp();
      if (auto kernel = mlir::dyn_cast<KernelOp>(parent)) {
        v = kernel.getInputs()[arg.getArgNumber()];
        continue;
      }
      if (auto func = mlir::dyn_cast<mlir::func::FuncOp>(parent)) {
        auto slot = func.getArgAttrOfType<mlir::IntegerAttr>(arg.getArgNumber(), kSlotAttrName);
        if (!slot)
          return std::nullopt;
        return slot.getInt();
      }
      return std::nullopt;
    }
    auto result = mlir::cast<mlir::OpResult>(v);
    mlir::Operation *op = result.getOwner();
    if (auto kernel = mlir::dyn_cast<KernelOp>(op)) {
      v = kernel.getBodyBlock().getTerminator()->getOperand(result.getResultNumber());
      continue;
    }
    if (auto insert = mlir::dyn_cast<InsertOp>(op)) {
      v = insert.getDest();
      continue;
    }
    llvm::SmallVector<unsigned> written = writtenOperands(op);
    if (result.getResultNumber() >= written.size())
      return std::nullopt;
    v = op->getOperand(written[result.getResultNumber()]);
  }
  return std::nullopt;
}

bool writesSlot(mlir::Operation *op, int64_t slot) {
  for (mlir::Value r : op->getResults())
    if (mlir::isa<BufferType>(r.getType()) && slotOf(r) == slot)
      return true;
  return false;
}

uint64_t bufferBytes(mlir::Value v) { return mlir::cast<BufferType>(v.getType()).getSizeBytes(); }

mlir::Value contractionInput(mlir::Operation *op) {
  if (auto q = mlir::dyn_cast<QMatmulOp>(op))
    return q.getX();
  if (auto m = mlir::dyn_cast<MatmulOp>(op))
    return m.getA();
  return nullptr;
}

bool hasContraction(mlir::Operation *op) {
  for (mlir::Operation *m : membersOf(op))
    if (m->hasTrait<ir::OpTrait::Contraction>())
      return true;
  return false;
}

void noteRejection(llvm::StringRef pattern, mlir::Operation *op, const llvm::Twine &reason) {
  static const bool debug = [] {
    const char *log = std::getenv("SINTER_LOG");
    return log && llvm::StringRef(log) == "debug";
  }();
  if (!debug)
    return;
  std::string location;
  llvm::raw_string_ostream os(location);
  op->getLoc().print(os);
  llvm::errs() << "sinter: " << pattern << " rejected at " << op->getName() << " " << location
               << ": " << reason << "\n";
}

} // namespace sinter::passes
