// LaunchGroups.cpp - matching a fused kernel's members against the generated kernel shapes.
#include "runtime/vulkan/LaunchGroups.h"

#include <algorithm>
#include <cstdint>

#include "support/Ops.h"

namespace sinter::runtime::vulkan {
namespace {

bool isOp(const KernelMember &m, OpKind kind) {
  return m.entry.kind == TraceEntry::Kind::Op && m.entry.op.kind == kind;
}

uint32_t slot(const KernelMember &m, int operand) {
  return Trace::slotOf(m.entry.op.buffers[operand]);
}

// Integer i of m when it is not a Plan parameter.
bool fixedInt(const KernelMember &m, int i, uint64_t *value) {
  if (m.paramOf[i] >= 0)
    return false;
  *value = m.entry.op.ints[i];
  return true;
}

codegen::OpShape shape(const KernelMember &m) {
  return codegen::shapeOf(m.entry.op, paramMaskOf(m));
}

bool isElementwise(OpKind k) {
  return k == OpKind::Silu || k == OpKind::Add || k == OpKind::ElementMul;
}

// KernelSpec::earlyInputs of a chain's members (spec order): the adds and element_muls whose
// second input no member before them writes, so the kernel may load it at its start. (The
// in-place residual add reads and writes its own slot: only its own row, after the read.)
uint32_t earlyInputsOf(const std::vector<KernelMember> &members) {
  uint32_t bits = 0;
  std::vector<uint32_t> written;
  for (size_t i = 0; i < members.size() && i < 32; ++i) {
    const OpCall &op = members[i].entry.op;
    if (i > 0 && (isOp(members[i], OpKind::Add) || isOp(members[i], OpKind::ElementMul)) &&
        std::find(written.begin(), written.end(), slot(members[i], 1)) == written.end())
      bits |= uint32_t(1) << i;
    absl::StatusOr<AccessList> accesses = opAccesses(op);
    if (!accesses.ok())
      return 0;
    for (const BufferAccess &a : *accesses)
      if (a.write)
        written.push_back(Trace::slotOf(op.buffers[a.bufferIndex]));
  }
  return bits;
}

Launch single(const KernelMember &m) {
  Launch l;
  l.members.push_back(m);
  return l;
}

// quantized_matmul members[q] reads x = norm's out with n_cols = norm's size, and writes none of
// the slots the norm reads or writes (every workgroup reads the norm's input).
bool feedsFromNorm(const KernelMember &norm, const KernelMember &q) {
  if (!isOp(q, OpKind::QuantizedMatmul) || slot(q, 1) != slot(norm, 2))
    return false;
  uint64_t size = 0, cols = 0;
  if (!fixedInt(norm, 0, &size) || !fixedInt(q, 1, &cols) || size != cols)
    return false;
  uint32_t out = slot(q, 2);
  return out != slot(norm, 0) && out != slot(norm, 1) && out != slot(norm, 2) &&
         slot(q, 0) != slot(norm, 2);
}

// The element-wise ops at ops[begin...] that chain from `chained` (the quantized_matmul `q`'s
// output) as an epilogue: each reads the previous output as one input and its other input at
// the same element, over q's n_rows elements, and writes nothing q or the norm reads.
std::vector<KernelMember> epilogueAt(const std::vector<KernelMember> &ops, size_t begin,
                                     const KernelMember &q, const KernelMember *norm) {
  std::vector<KernelMember> chain;
  uint64_t rows = 0;
  if (!fixedInt(q, 0, &rows))
    return chain;
  std::vector<uint32_t> readByProduct{slot(q, 0), slot(q, 1)};
  if (norm)
    readByProduct.insert(readByProduct.end(), {slot(*norm, 0), slot(*norm, 1), slot(*norm, 2)});
  std::vector<uint32_t> written{slot(q, 2)};
  uint32_t value = slot(q, 2);
  for (size_t i = begin; i < ops.size(); ++i) {
    KernelMember m = ops[i];
    if (m.entry.kind != TraceEntry::Kind::Op || !isElementwise(m.entry.op.kind))
      break;
    uint64_t size = 0;
    if (!fixedInt(m, 0, &size) || size != rows)
      break;
    OpCall &op = m.entry.op;
    uint32_t out;
    if (op.kind == OpKind::Silu) {
      if (slot(m, 0) != value)
        break;
      out = slot(m, 1);
    } else {
      if (slot(m, 1) == value && slot(m, 0) != value)
        std::swap(op.buffers[0], op.buffers[1]);
      uint32_t other = slot(m, 1);
      if (slot(m, 0) != value || std::find(written.begin(), written.end(), other) != written.end())
        break;
      out = slot(m, 2);
    }
    if (std::find(readByProduct.begin(), readByProduct.end(), out) != readByProduct.end())
      break;
    chain.push_back(m);
    written.push_back(out);
    value = out;
  }
  return chain;
}

// rope as the epilogue of one projection: rope(q = out, k = out, n_heads_q = heads,
// n_heads_k = 0) rotates that projection's rows only (`operand` 0 for q, 1 for k), which is
// what the projection's launch computes and all it touches.
KernelMember ropeOfOne(const KernelMember &rope, int operand, uint64_t heads) {
  KernelMember one = rope;
  OpCall &op = one.entry.op;
  op.buffers[0] = op.buffers[1] = rope.entry.op.buffers[operand];
  op.ints[2] = heads;
  op.ints[3] = 0;
  return one;
}

// The rope and the cache copies at ops[begin...] after the products `products` of a norm's group,
// as epilogues of the products whose outputs they read (`tails`, one per product): rope splits
// into the rotation of Q's rows and of K's rows, and a copy_buffer_offset of a product's whole
// output into another buffer (the K or V cache) becomes a second store of each row. Returns how
// many ops were taken; none when the first is not a rope or copy in that shape.
//
// The launches then run before the ops they overtake (the products after Q, the copies after K):
// each op taken touches only its product's output and a destination that nothing in the group
// reads or writes, so the order does not matter.
size_t cacheTailsAt(const std::vector<KernelMember> &ops, size_t begin, const KernelMember &norm,
                    const std::vector<size_t> &products,
                    std::vector<std::vector<KernelMember>> *tails) {
  tails->assign(products.size(), {});
  auto productOf = [&](uint32_t s) -> int {
    for (size_t p = 0; p < products.size(); ++p)
      if (slot(ops[products[p]], 2) == s)
        return static_cast<int>(p);
    return -1;
  };
  auto rowsOf = [&](int p, uint64_t *rows) { return fixedInt(ops[products[p]], 0, rows); };
  std::vector<uint32_t> group{slot(norm, 0), slot(norm, 1), slot(norm, 2)};
  for (size_t p : products)
    group.insert(group.end(), {slot(ops[p], 0), slot(ops[p], 2)});
  auto in = [](const std::vector<uint32_t> &v, uint32_t s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  size_t i = begin;
  if (i < ops.size() && isOp(ops[i], OpKind::Rope)) {
    const KernelMember &r = ops[i];
    int q = productOf(slot(r, 0)), k = productOf(slot(r, 1));
    uint64_t dim = 0, headsQ = 0, headsK = 0, rowsQ = 0, rowsK = 0;
    if (q >= 0 && k >= 0 && q != k && fixedInt(r, 1, &dim) && fixedInt(r, 2, &headsQ) &&
        fixedInt(r, 3, &headsK) && dim > 0 && dim % 2 == 0 && rowsOf(q, &rowsQ) &&
        rowsOf(k, &rowsK) && rowsQ == headsQ * dim && rowsK == headsK * dim) {
      (*tails)[q].push_back(ropeOfOne(r, 0, headsQ));
      (*tails)[k].push_back(ropeOfOne(r, 1, headsK));
      ++i;
    }
  }
  if (i == begin && !(i < ops.size() && isOp(ops[i], OpKind::CopyBufferOffset)))
    return 0;
  std::vector<uint32_t> written;
  for (; i < ops.size() && isOp(ops[i], OpKind::CopyBufferOffset); ++i) {
    const KernelMember &c = ops[i];
    int p = productOf(slot(c, 0));
    uint64_t from = 0, size = 0, rows = 0;
    uint32_t dst = slot(c, 1);
    if (p < 0 || !fixedInt(c, 0, &from) || from != 0 || !fixedInt(c, 2, &size) ||
        !rowsOf(p, &rows) || size != 4 * rows || in(group, dst) || in(written, dst))
      break;
    bool copied = false; // one copy a product
    for (const KernelMember &m : (*tails)[p])
      copied |= isOp(m, OpKind::CopyBufferOffset);
    if (copied)
      break;
    (*tails)[p].push_back(c);
    written.push_back(dst);
  }
  return i - begin;
}

// The gate and up products of a norm's group as one launch: `epilogue` chains from `anchor`
// and each of its binary members takes `sibling`'s output as its second input; both products
// Q4_0 or Q8_0 of one format and the same fixed rows, and the epilogue writes neither matrix.
bool siblingPair(const KernelMember &anchor, const KernelMember &sibling,
                 const std::vector<KernelMember> &epilogue) {
  DType t = anchor.entry.op.dtype;
  uint64_t rowsA = 0, rowsB = 0, colsA = 0, colsB = 0;
  if ((t != DType::Q4_0 && t != DType::Q8_0) || sibling.entry.op.dtype != t ||
      !fixedInt(anchor, 0, &rowsA) || !fixedInt(sibling, 0, &rowsB) || rowsA != rowsB ||
      !fixedInt(anchor, 1, &colsA) || !fixedInt(sibling, 1, &colsB) || colsA != colsB ||
      epilogue.empty())
    return false;
  for (const KernelMember &m : epilogue) {
    bool binary = !isOp(m, OpKind::Silu);
    if (binary && slot(m, 1) != slot(sibling, 2))
      return false;
    uint32_t out = slot(m, binary ? 2 : 1);
    if (out == slot(sibling, 0) || out == slot(sibling, 1))
      return false;
  }
  return true;
}

// The products of a norm's group with their tails as one stacked launch (members: the norm,
// then each product followed by its tail), or nothing (kind Single) when they do not qualify:
// two or more products of one format with fixed row counts (the grid is fixed when the kernel
// is built).
Launch stackedLaunch(const KernelMember &norm, const std::vector<KernelMember> &ops,
                     const std::vector<size_t> &products,
                     const std::vector<std::vector<KernelMember>> &tails) {
  Launch l;
  if (products.size() < 2)
    return l;
  DType dtype = ops[products[0]].entry.op.dtype;
  for (size_t p : products) {
    uint64_t rows = 0;
    if (ops[p].entry.op.dtype != dtype || !fixedInt(ops[p], 0, &rows) || rows == 0 ||
        rows > INT32_MAX)
      return l;
  }
  auto productShape = [&](const KernelMember &m) {
    codegen::OpShape s = shape(m);
    s.staticMask |= 1; // n_rows
    s.ints[0] = static_cast<int64_t>(m.entry.op.ints[0]);
    return s;
  };
  l.kind = Launch::Kind::Chain;
  l.members.push_back(norm);
  l.spec.prologue.push_back(shape(norm));
  for (size_t p = 0; p < products.size(); ++p) {
    const KernelMember &q = ops[products[p]];
    l.members.push_back(q);
    if (p == 0)
      l.spec.anchor = productShape(q);
    else
      l.spec.epilogue.push_back(productShape(q));
    for (const KernelMember &m : tails[p]) {
      l.members.push_back(m);
      l.spec.epilogue.push_back(shape(m));
    }
  }
  l.spec.stackedProducts = true;
  l.spec.rowsHint = static_cast<uint32_t>(ops[products[0]].entry.op.ints[0]);
  return l;
}

Launch chainLaunch(const KernelMember *norm, const KernelMember &q,
                   const std::vector<KernelMember> &epilogue, bool storeNorm) {
  Launch l;
  l.kind = Launch::Kind::Chain;
  if (norm) {
    l.members.push_back(*norm);
    l.spec.prologue.push_back(shape(*norm));
  }
  l.members.push_back(q);
  l.spec.anchor = shape(q);
  for (const KernelMember &m : epilogue) {
    l.members.push_back(m);
    l.spec.epilogue.push_back(shape(m));
  }
  l.spec.unstoredOutputs = norm && !storeNorm ? 1u : 0u;
  l.spec.earlyInputs = earlyInputsOf(l.members);
  uint64_t rows = 0; // schedules that depend on the grid's size need the row count
  if (fixedInt(q, 0, &rows) && rows <= UINT32_MAX)
    l.spec.rowsHint = static_cast<uint32_t>(rows);
  return l;
}

// The attention launch of the (attn_score, softmax, attn_value) triples at ops[begin...], or
// nothing (heads == 0) when they are not one layer's heads in the shape the kernel computes.
Launch attentionAt(const std::vector<KernelMember> &ops, size_t begin, size_t *taken) {
  Launch l;
  *taken = 0;
  auto triple = [&](size_t i) {
    return i + 2 < ops.size() && isOp(ops[i], OpKind::AttnScore) &&
           isOp(ops[i + 1], OpKind::Softmax) && isOp(ops[i + 2], OpKind::AttnValue);
  };
  if (!triple(begin))
    return l;
  const KernelMember &s0 = ops[begin], &v0 = ops[begin + 2];
  uint32_t q = slot(s0, 0), k = slot(s0, 1), scores = slot(s0, 2);
  uint32_t v = slot(v0, 1), out = slot(v0, 2);
  // The kernel reads q, K, V while writing out and (the last head) scores: keep them apart.
  std::vector<uint32_t> slots{q, k, scores, v, out};
  for (size_t a = 0; a < slots.size(); ++a)
    for (size_t b = a + 1; b < slots.size(); ++b)
      if (slots[a] == slots[b] && !((a == 1 && b == 3) || (a == 0 && b == 1) ||
                                    (a == 0 && b == 3))) // read-only slots may coincide
        return l;
  uint64_t dim = 0, kStride = 0, vStride = 0, vDim = 0;
  if (!fixedInt(s0, 0, &dim) || !fixedInt(s0, 4, &kStride) || !fixedInt(v0, 0, &vDim) ||
      !fixedInt(v0, 3, &vStride) || vDim != dim || dim == 0)
    return l;
  struct Offsets {
    uint64_t q, k, v, out;
  };
  std::vector<Offsets> heads;
  for (size_t i = begin; triple(i); i += 3) {
    const KernelMember &s = ops[i], &sm = ops[i + 1], &val = ops[i + 2];
    if (slot(s, 0) != q || slot(s, 1) != k || slot(s, 2) != scores || slot(sm, 0) != scores ||
        slot(sm, 1) != scores || slot(val, 0) != scores || slot(val, 1) != v || slot(val, 2) != out)
      break;
    Offsets o{};
    uint64_t d = 0, ks = 0, vd = 0, vs = 0;
    if (!fixedInt(s, 0, &d) || d != dim || !fixedInt(s, 4, &ks) || ks != kStride ||
        !fixedInt(val, 0, &vd) || vd != dim || !fixedInt(val, 3, &vs) || vs != vStride ||
        !fixedInt(s, 2, &o.q) || !fixedInt(s, 3, &o.k) || !fixedInt(val, 2, &o.v) ||
        !fixedInt(val, 4, &o.out))
      break;
    // seq_len (score, value) and size (softmax): parameters or constants, equal across the
    // heads at run time (attentionUniform); constants are compared here.
    uint64_t a = 0, b = 0, c = 0;
    bool fa = fixedInt(s, 1, &a), fb = fixedInt(sm, 0, &b), fc = fixedInt(val, 1, &c);
    uint64_t first = 0;
    if (fixedInt(s0, 1, &first) != fa || (fa && a != first) || (fb && fa && b != a) ||
        (fc && fa && c != a))
      break;
    heads.push_back(o);
  }
  if (heads.empty())
    return l;
  // Offsets affine in the head: q and out by h, K and V by h / group.
  size_t n = heads.size(), group = n;
  for (size_t h = 1; h < n; ++h)
    if (heads[h].k != heads[0].k || heads[h].v != heads[0].v) {
      group = h;
      break;
    }
  auto step = [&](uint64_t Offsets::*f, size_t at) -> int64_t {
    return at < n ? int64_t(heads[at].*f) - int64_t(heads[0].*f) : 0;
  };
  int64_t qStep = step(&Offsets::q, 1), outStep = step(&Offsets::out, 1);
  int64_t kStep = step(&Offsets::k, group), vStep = step(&Offsets::v, group);
  if (qStep < 0 || outStep < 0 || kStep < 0 || vStep < 0 || n % group != 0)
    return l;
  for (size_t h = 0; h < n; ++h) {
    const Offsets &o = heads[h];
    int64_t kv = int64_t(h / group);
    if (int64_t(o.q) != int64_t(heads[0].q) + int64_t(h) * qStep ||
        int64_t(o.out) != int64_t(heads[0].out) + int64_t(h) * outStep ||
        int64_t(o.k) != int64_t(heads[0].k) + kv * kStep ||
        int64_t(o.v) != int64_t(heads[0].v) + kv * vStep)
      return l;
  }
  // Heads must not overlap in out (each workgroup writes its own head_dim floats).
  if (n > 1 && uint64_t(outStep) < dim)
    return l;
  for (int64_t w : {int64_t(n), int64_t(group), qStep, kStep, vStep, outStep})
    if (w >= (int64_t(1) << 31))
      return l;
  l.kind = Launch::Kind::Attention;
  l.members = {ops[begin], ops[begin + 1], ops[begin + 2]};
  l.spec.anchor = shape(ops[begin]);
  l.spec.epilogue = {shape(ops[begin + 1]), shape(ops[begin + 2])};
  l.spec.attentionOverHeads = true;
  l.headMembers.assign(ops.begin() + begin, ops.begin() + begin + 3 * n);
  l.attentionWords = {uint32_t(n),
                      uint32_t(group),
                      uint32_t(qStep),
                      uint32_t(kStep),
                      uint32_t(vStep),
                      uint32_t(outStep),
                      1u}; // scores stored unless dead
  *taken = 3 * n;
  return l;
}

} // namespace

std::vector<Launch> planLaunches(const Kernel &kernel, const LaunchOptions &options) {
  const std::vector<KernelMember> &ops = kernel.ops;
  std::vector<Launch> launches;
  size_t i = 0;
  while (i < ops.size()) {
    const KernelMember &m = ops[i];
    size_t taken = 0;
    Launch attention = attentionAt(ops, i, &taken);
    if (taken > 0) {
      launches.push_back(std::move(attention));
      i += taken;
      continue;
    }
    // The fused kernel reads the norm's input and weight in every workgroup while one of them
    // stores its output: the output must be neither.
    if (isOp(m, OpKind::RmsNorm) && slot(m, 2) != slot(m, 0) && slot(m, 2) != slot(m, 1)) {
      // The products after the norm that read it, each with the norm as its prologue.
      size_t j = i + 1;
      std::vector<size_t> products;
      for (; j < ops.size() && feedsFromNorm(m, ops[j]); ++j) {
        bool distinct = true; // a product must not write what another one reads
        for (size_t p : products)
          distinct &= slot(ops[p], 2) != slot(ops[j], 2) && slot(ops[p], 2) != slot(ops[j], 0) &&
                      slot(ops[j], 2) != slot(ops[p], 0);
        if (!distinct)
          break;
        products.push_back(j);
      }
      std::vector<std::vector<KernelMember>> tails;
      size_t tailOps =
          !products.empty() && options.cacheTails ? cacheTailsAt(ops, j, m, products, &tails) : 0;
      if (tailOps > 0) {
        Launch stacked =
            options.stackedProducts ? stackedLaunch(m, ops, products, tails) : Launch{};
        if (stacked.kind == Launch::Kind::Chain) {
          launches.push_back(std::move(stacked));
          i = j + tailOps;
          continue;
        }
        for (size_t p = 0; p < products.size(); ++p)
          launches.push_back(chainLaunch(&m, ops[products[p]], tails[p], p == 0));
        i = j + tailOps;
        continue;
      }
      if (!products.empty()) {
        // An epilogue after the group chains from one product: launch that one last (the others
        // are independent of it), so its epilogue sees every other product's output.
        size_t chained = products.size();
        std::vector<KernelMember> epilogue;
        for (size_t p = 0; p < products.size() && epilogue.empty(); ++p) {
          epilogue = epilogueAt(ops, j, ops[products[p]], &m);
          if (!epilogue.empty())
            chained = p;
        }
        if (options.siblingProducts && products.size() == 2 && chained < 2 &&
            siblingPair(ops[products[chained]], ops[products[1 - chained]], epilogue)) {
          std::vector<KernelMember> members{ops[products[1 - chained]]};
          members.insert(members.end(), epilogue.begin(), epilogue.end());
          launches.push_back(chainLaunch(&m, ops[products[chained]], members, true));
          i = j + epilogue.size();
          continue;
        }
        std::vector<size_t> order;
        for (size_t p = 0; p < products.size(); ++p)
          if (p != chained)
            order.push_back(products[p]);
        if (chained < products.size())
          order.push_back(products[chained]);
        for (size_t p = 0; p < order.size(); ++p) {
          bool last = chained < products.size() && p + 1 == order.size();
          launches.push_back(chainLaunch(&m, ops[order[p]],
                                         last ? epilogue : std::vector<KernelMember>{}, p == 0));
        }
        i = j + epilogue.size();
        continue;
      }
    }
    if (isOp(m, OpKind::QuantizedMatmul) && slot(m, 1) != slot(m, 2)) {
      std::vector<KernelMember> epilogue = epilogueAt(ops, i + 1, m, nullptr);
      if (!epilogue.empty()) {
        launches.push_back(chainLaunch(nullptr, m, epilogue, false));
        i += 1 + epilogue.size();
        continue;
      }
    }
    launches.push_back(single(m));
    ++i;
  }
  return launches;
}

bool hasCacheTail(const Launch &launch) {
  for (const codegen::OpShape &m : launch.spec.epilogue)
    if (m.kind == OpKind::Rope || m.kind == OpKind::CopyBufferOffset)
      return true;
  return false;
}

SeqLenSources seqLenSources(absl::Span<const KernelMember> headMembers) {
  SeqLenSources s;
  for (const KernelMember &m : headMembers) {
    const int i = m.entry.op.kind == OpKind::Softmax ? 0 : 1;
    if (m.paramOf[i] >= 0) {
      const uint32_t p = static_cast<uint32_t>(m.paramOf[i]);
      if (std::find(s.params.begin(), s.params.end(), p) == s.params.end())
        s.params.push_back(p);
    } else if (!s.hasConstant) {
      s.hasConstant = true;
      s.constant = m.entry.op.ints[i];
    } else {
      s.constantsDiffer |= m.entry.op.ints[i] != s.constant;
    }
  }
  return s;
}

bool seqLensAgree(const SeqLenSources &s, absl::Span<const uint64_t> params) {
  if (s.constantsDiffer || (s.params.empty() && !s.hasConstant))
    return false;
  for (uint32_t p : s.params)
    if (p >= params.size())
      return false;
  const uint64_t first = s.hasConstant ? s.constant : params[s.params[0]];
  for (uint32_t p : s.params)
    if (params[p] != first)
      return false;
  return true;
}

bool attentionUniform(absl::Span<const KernelMember> headMembers,
                      absl::Span<const uint64_t> params) {
  return seqLensAgree(seqLenSources(headMembers), params);
}

} // namespace sinter::runtime::vulkan
