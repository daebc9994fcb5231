// KernelSpec.cpp - kernel shapes, their keys and the size of each op's parallel dimension.
//
// Which integers a kernel bakes in is the one policy that decides how many distinct kernels a
// model needs: a decode step has ~2400 calls but, with offsets read at run time, ~20 shapes.
#include "codegen/KernelSpec.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sinter::codegen {

float OpShape::scalar() const {
  float f;
  std::memcpy(&f, &scalarBits, sizeof(f));
  return f;
}

bool operator==(const OpShape &a, const OpShape &b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.scalarBits == b.scalarBits &&
         a.staticMask == b.staticMask && a.ints == b.ints;
}

uint8_t specializedInts(OpKind kind) {
  static_assert(kNumOpKinds == 12, "say which integers of the new op are specialised");
  switch (kind) {
  case OpKind::Matmul:
    return 0b110; // n, k (m only bounds the parallel dimension)
  case OpKind::Rope:
    return 0b0010; // head_dim (pos and the head counts are read at run time)
  case OpKind::AttnScore:
    return 0b00001; // head_dim
  case OpKind::QuantizedMatmul:
    return 0b10; // n_cols
  default:
    // Element counts only bound loops whose bodies do not depend on them; offsets and strides
    // only move addresses. Reading them at run time lets one kernel serve every head and layer.
    return 0;
  }
}

OpShape shapeOf(const OpCall &op, uint8_t paramMask) {
  OpShape s;
  s.kind = op.kind;
  s.dtype = op.kind == OpKind::QuantizedMatmul ? op.dtype : DType::F32;
  const OpInfo &info = opInfo(op.kind);
  if (info.scalarName)
    std::memcpy(&s.scalarBits, &op.scalar, sizeof(float));
  s.staticMask = specializedInts(op.kind) & ~paramMask;
  for (int i = 0; i < 5; ++i)
    if (s.isStatic(i))
      s.ints[i] = static_cast<int64_t>(op.ints[i]);
  return s;
}

namespace {

void appendShape(std::string *key, const OpShape &s) {
  key->push_back(static_cast<char>(s.kind));
  key->append(reinterpret_cast<const char *>(&s.dtype), sizeof(s.dtype));
  key->append(reinterpret_cast<const char *>(&s.scalarBits), sizeof(s.scalarBits));
  key->push_back(static_cast<char>(s.staticMask));
  for (int i = 0; i < 5; ++i)
    if (s.isStatic(i))
      key->append(reinterpret_cast<const char *>(&s.ints[i]), sizeof(int64_t));
}

} // namespace

std::string KernelSpec::key() const {
  std::string k;
  k.push_back(static_cast<char>(prologue.size()));
  k.push_back(static_cast<char>(epilogue.size()));
  k.push_back(injectFailure ? 1 : 0);
  k.push_back(attentionOverHeads ? 1 : 0);
  k.push_back(stackedProducts ? 1 : 0);
  k.append(reinterpret_cast<const char *>(&unstoredOutputs), sizeof(unstoredOutputs));
  k.append(reinterpret_cast<const char *>(&rowsHint), sizeof(rowsHint));
  k.append(reinterpret_cast<const char *>(&earlyInputs), sizeof(earlyInputs));
  for (const OpShape &s : prologue)
    appendShape(&k, s);
  appendShape(&k, anchor);
  for (const OpShape &s : epilogue)
    appendShape(&k, s);
  return k;
}

std::vector<StackedSegment> stackedSegments(const KernelSpec &spec) {
  std::vector<StackedSegment> segments(1);
  segments[0].member = static_cast<int>(spec.prologue.size());
  segments[0].product = &spec.anchor;
  for (size_t j = 0; j < spec.epilogue.size(); ++j) {
    const OpShape &m = spec.epilogue[j];
    if (spec.stackedProducts && m.kind == OpKind::QuantizedMatmul) {
      StackedSegment next;
      next.member = static_cast<int>(spec.prologue.size() + 1 + j);
      next.product = &m;
      segments.push_back(std::move(next));
      continue;
    }
    segments.back().tail.push_back(m);
  }
  return segments;
}

KernelSpec segmentSpec(const KernelSpec &spec, const StackedSegment &seg) {
  KernelSpec one;
  one.prologue = spec.prologue;
  one.anchor = *seg.product;
  one.epilogue = seg.tail;
  const bool first = seg.product == &spec.anchor;
  one.unstoredOutputs = first ? spec.unstoredOutputs : (spec.prologue.empty() ? 0u : 1u);
  one.rowsHint = spec.rowsHint;
  return one;
}

std::string KernelSpec::name() const {
  const OpInfo &info = opInfo(anchor.kind);
  std::string n = info.name;
  if (anchor.kind == OpKind::QuantizedMatmul)
    absl::StrAppend(&n, "_", absl::AsciiStrToLower(dtypeName(anchor.dtype)));
  for (int i = 0; i < info.numInts; ++i) {
    if (!anchor.isStatic(i))
      continue;
    // First letter of each word of the integer's name: n_cols -> "nc".
    std::string tag;
    const char *p = info.intNames[i];
    for (bool start = true; *p; ++p) {
      if (start)
        tag.push_back(*p);
      start = *p == '_';
    }
    absl::StrAppend(&n, "_", tag, anchor.ints[i]);
  }
  for (const OpShape &s : epilogue)
    absl::StrAppend(&n, "_", opInfo(s.kind).name);
  if (attentionOverHeads)
    absl::StrAppend(&n, "_heads");
  if (stackedProducts)
    absl::StrAppend(&n, "_stacked");
  if (!prologue.empty())
    n = absl::StrCat(opInfo(prologue[0].kind).name, "_", n);
  if (unstoredOutputs != 0)
    absl::StrAppend(&n, "_nostore", unstoredOutputs);
  if (rowsHint != 0)
    absl::StrAppend(&n, "_r", rowsHint);
  if (earlyInputs != 0)
    absl::StrAppend(&n, "_early", earlyInputs);
  return n;
}

KernelSpec singleOpSpec(const OpCall &op, uint8_t paramMask) {
  KernelSpec spec;
  spec.anchor = shapeOf(op, paramMask);
  return spec;
}

uint64_t parallelSize(OpKind kind, const int64_t *ints) {
  auto u = [&](int i) { return static_cast<uint64_t>(ints[i]); };
  auto tiles = [](uint64_t n, uint64_t tile) { return (n + tile - 1) / tile; };
  switch (kind) {
  case OpKind::Matmul:
    return u(0) * tiles(u(1), kMatmulTile);
  case OpKind::Silu:
  case OpKind::ElementMul:
  case OpKind::Add:
    return u(0);
  case OpKind::AttnScore:
    return u(1);
  case OpKind::AttnValue:
    return tiles(u(0), kAttnValueTile);
  case OpKind::QuantizedMatmul:
    return u(0);
  case OpKind::Softmax:
  case OpKind::RmsNorm:
  case OpKind::Rope:
  case OpKind::CopyBuffer:
  case OpKind::CopyBufferOffset:
    return 1;
  }
  return 1;
}

uint64_t workBytes(OpKind kind, DType dtype, const int64_t *ints) {
  auto u = [&](int i) { return static_cast<uint64_t>(ints[i]); };
  switch (kind) {
  case OpKind::Matmul:
    return 4 * (u(0) * u(2) + u(2) * u(1) * std::max<uint64_t>(1, u(0) / 4) + u(0) * u(1));
  case OpKind::Silu:
  case OpKind::Softmax:
    return 8 * u(0);
  case OpKind::ElementMul:
  case OpKind::Add:
  case OpKind::RmsNorm:
    return 12 * u(0);
  case OpKind::Rope:
    return 8 * u(1) * (u(2) + u(3));
  case OpKind::CopyBuffer:
    return 2 * u(0);
  case OpKind::CopyBufferOffset:
    return 2 * u(2);
  case OpKind::AttnScore:
  case OpKind::AttnValue:
    return 4 * u(0) * u(1);
  case OpKind::QuantizedMatmul: {
    const DTypeInfo &info = dtypeInfo(dtype);
    return u(0) * rowBytes(info, u(1) - u(1) % info.blockSize);
  }
  }
  return 0;
}

} // namespace sinter::codegen
