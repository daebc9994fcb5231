// CpuCompiler.cpp - programs to CPU plans: kernel cache, fallback, and the plan that runs them.
//
// compile() looks every member op's kernel up by structural key, compiles the missing ones in one
// JIT module (so a cold plan pays per-module costs once), and isolates a failure by compiling the
// batch one kernel at a time. The plan keeps the modules of its kernels, so the LRU may drop them
// meanwhile. The plan's run loop does no allocation: per op it patches the parameters into an
// int64 array, gathers three buffer addresses and calls the entry point, inline or across the
// pool.
#include "codegen/CpuCompiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "runtime/FaultInjection.h" // inline checks only: no link dependency on the runtime

namespace sinter::codegen {

namespace {

// Each parallel chunk should move at least this much memory.
constexpr uint64_t kMinChunkBytes = 32 << 10;

// One step of a CPU plan: an upload, or one op on its kernel (fn null: the reference kernel).
struct Step {
  KernelMember op;
  bool upload = false;
  KernelFn fn = nullptr;
  std::string kernelName;
  size_t kernelIndex = 0; ///< the program kernel this step belongs to
};

// The largest fused kernel: a prologue, the anchor and two epilogue ops.
constexpr size_t kMaxFusedMembers = 4;
struct FusedArgs {
  uint8_t *buffers[3 * kMaxFusedMembers];
  int64_t ints[5 * kMaxFusedMembers];
};

// A step's integers and buffer addresses for one run.
struct Bound {
  int64_t ints[5];
  uint8_t *buffers[3];
};

Bound bind(const Step &step, const PlanArgs &args) {
  const OpCall &op = step.op.entry.op;
  Bound b;
  for (int i = 0; i < 5; ++i) {
    int32_t p = step.op.paramOf[i];
    b.ints[i] = static_cast<int64_t>(p >= 0 ? args.params[p] : op.ints[i]);
  }
  for (int i = 0; i < 3; ++i)
    b.buffers[i] =
        i < opInfo(op.kind).numBuffers ? args.slotData[Trace::slotOf(op.buffers[i])] : nullptr;
  return b;
}

const OpCall &opOf(const Step &step) { return step.op.entry.op; }
uint32_t slotOf(const Step &step, int operand) {
  return Trace::slotOf(opOf(step).buffers[operand]);
}
bool isParam(const Step &step, int i) { return step.op.paramOf[i] >= 0; }

// One quantized_matmul of a row launch and the element-wise ops applied to its rows after it
// (each element-wise op's element i is the anchor's row i).
struct Segment {
  size_t anchor = 0;            ///< step index
  std::vector<size_t> epilogue; ///< step indices, in order
  /// The fused kernel computing the whole segment (KernelSpec prologue, anchor, epilogue), or
  /// null: the anchor's kernel, then each epilogue op's, on each range of rows.
  KernelFn fused = nullptr;
  std::vector<size_t> members; ///< the fused kernel's members in spec order (step indices)
};

// Segments over one row index space, run one after another on each range of rows. A segment
// without an epilogue may come first so that a later one's epilogue reads its rows (SwiGLU's up
// projection before the gate's silu and element_mul).
struct Lane {
  std::vector<Segment> segments;
};

// How the steps of one program kernel run:
// - Serial: member by member, each op's parallel dimension split across the pool (the unfused
//   way; every kernel that is not one of the two shapes below, or has a reference member).
// - Rows: `pre` in order, then ONE parallel loop over the rows of every lane (the quantized_matmul
//   anchors of a horizontal group, each with its element-wise epilogue applied to the same rows
//   inside the same task), then `post` in order (rope, KV-cache writes).
// - Attention: `heads` groups of attn_score, softmax, attn_value as one parallel loop over heads,
//   each head's scores in scratch memory of its own except the last head's, which go to the
//   shared scores buffer: afterwards it holds what the unfused order leaves there.
struct Launch {
  enum class Kind { Serial, Rows, Attention } kind = Kind::Serial;
  size_t first = 0, last = 0; ///< the kernel's steps [first, last)
  std::vector<size_t> pre, post;
  size_t rowFirst = 0, rowLast = 0; ///< Rows: the steps of the loop, [rowFirst, rowLast)
  std::vector<Lane> lanes;
  size_t heads = 0; ///< Attention: steps first + 3h, +1, +2 are head h's
};

bool isRowEpilogueKind(OpKind kind) {
  return kind == OpKind::Add || kind == OpKind::Silu || kind == OpKind::ElementMul;
}

// Attention over heads: repeated (attn_score, softmax, attn_value) groups that share one scores
// buffer (score's output, softmax in place, value's weights), read q, K and V that no member
// writes, and write disjoint ranges of one output that none of them reads.
bool matchAttention(const std::vector<Step> &steps, Launch &launch) {
  size_t n = launch.last - launch.first;
  if (n < 6 || n % 3 != 0)
    return false;
  const Step &first = steps[launch.first];
  uint32_t scores = slotOf(first, 2), out = slotOf(steps[launch.first + 2], 2);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (size_t i = launch.first; i < launch.last; i += 3) {
    const Step &s = steps[i], &m = steps[i + 1], &v = steps[i + 2];
    if (opOf(s).kind != OpKind::AttnScore || opOf(m).kind != OpKind::Softmax ||
        opOf(v).kind != OpKind::AttnValue)
      return false;
    if (slotOf(s, 2) != scores || slotOf(m, 0) != scores || slotOf(m, 1) != scores ||
        slotOf(v, 0) != scores || slotOf(v, 2) != out)
      return false;
    for (uint32_t input : {slotOf(s, 0), slotOf(s, 1), slotOf(v, 1)})
      if (input == scores || input == out)
        return false;
    if (isParam(v, 0) || isParam(v, 4)) // head_dim and out_offset place the output
      return false;
    ranges.emplace_back(opOf(v).ints[4], opOf(v).ints[4] + opOf(v).ints[0]);
  }
  if (out == scores)
    return false;
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      return false;
  launch.kind = Launch::Kind::Attention;
  launch.heads = n / 3;
  return true;
}

// A row launch: the steps before the first quantized_matmul, a run of quantized_matmuls (none
// reads or writes another's operands), the element-wise ops after them that can be applied row by
// row as epilogues, and the rest.
bool matchRows(const std::vector<Step> &steps, Launch &launch) {
  size_t i = launch.first;
  while (i < launch.last && opOf(steps[i]).kind != OpKind::QuantizedMatmul)
    ++i;
  if (i == launch.last)
    return false;
  launch.rowFirst = i;
  std::vector<uint32_t> wholeReads; // the matrices and x vectors of the anchors
  std::vector<uint32_t> written;    // every buffer the loop writes
  for (; i < launch.last && opOf(steps[i]).kind == OpKind::QuantizedMatmul; ++i) {
    wholeReads.push_back(slotOf(steps[i], 0));
    wholeReads.push_back(slotOf(steps[i], 1));
    written.push_back(slotOf(steps[i], 2));
    launch.lanes.push_back(Lane{{Segment{i, {}}}});
  }
  auto contains = [](const std::vector<uint32_t> &v, uint32_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (uint32_t w : written)
    if (contains(wholeReads, w) || std::count(written.begin(), written.end(), w) > 1)
      return false;
  // The buffer each segment's chain ends in, the buffers it owns (writes) and reads by element.
  struct Chain {
    size_t lane, segment;
    uint32_t tail;
    std::vector<uint32_t> owned, elementReads;
    bool provider = false; ///< read by another lane's epilogue: gets no epilogue of its own
  };
  std::vector<Chain> chains;
  for (size_t l = 0; l < launch.lanes.size(); ++l) {
    uint32_t out = slotOf(steps[launch.lanes[l].segments[0].anchor], 2);
    chains.push_back(Chain{l, 0, out, {out}, {}});
  }
  auto rowsOf = [&](const Chain &c) {
    return opOf(steps[launch.lanes[c.lane].segments[c.segment].anchor]).ints[0];
  };
  auto staticRows = [&](const Chain &c) {
    return !isParam(steps[launch.lanes[c.lane].segments[c.segment].anchor], 0);
  };
  for (; i < launch.last; ++i) {
    const Step &e = steps[i];
    const OpCall &op = opOf(e);
    if (!isRowEpilogueKind(op.kind) || isParam(e, 0) || !e.fn)
      break;
    int numInputs = op.kind == OpKind::Silu ? 1 : 2;
    uint32_t in[2] = {slotOf(e, 0), numInputs == 2 ? slotOf(e, 1) : slotOf(e, 0)};
    uint32_t out = slotOf(e, numInputs);
    // The chain whose value the op reads (its first operand's, then its second's), and the
    // provider of its other operand when that is another lane's bare anchor output.
    Chain *chain = nullptr, *provider = nullptr;
    uint32_t other = 0;
    for (uint32_t chained : {in[0], in[1]}) {
      for (Chain &c : chains) {
        if (chain || c.provider || c.tail != chained || !staticRows(c) ||
            uint64_t(rowsOf(c)) != op.ints[0])
          continue;
        uint32_t o = chained == in[0] ? in[1] : in[0];
        Chain *p = nullptr;
        if (o != c.tail && contains(written, o)) {
          for (Chain &q : chains)
            if (&q != &c && q.owned.size() == 1 && q.owned[0] == o && q.elementReads.empty() &&
                launch.lanes[q.lane].segments.size() == 1 && staticRows(q) &&
                rowsOf(q) == rowsOf(c))
              p = &q;
          if (!p)
            continue;
        }
        chain = &c;
        provider = p;
        other = o;
      }
    }
    if (!chain)
      break;
    // The output: not an anchor's matrix or x, not another chain's buffer or element read.
    bool clash = contains(wholeReads, out);
    for (const Chain &c : chains)
      if (&c != chain && (contains(c.owned, out) || contains(c.elementReads, out)))
        clash = true;
    for (const Chain &c : chains)
      if (&c != chain && &c != provider && contains(c.owned, other))
        clash = true;
    if (clash)
      break;
    if (provider && !provider->provider) {
      // Move the provider's segment to the front of this chain's lane.
      Lane &from = launch.lanes[provider->lane];
      Lane &to = launch.lanes[chain->lane];
      to.segments.insert(to.segments.begin(), from.segments[0]);
      from.segments.clear();
      for (Chain &c : chains)
        if (c.lane == chain->lane)
          ++c.segment;
      provider->lane = chain->lane;
      provider->segment = 0;
      provider->provider = true;
    }
    launch.lanes[chain->lane].segments[chain->segment].epilogue.push_back(i);
    if (other != chain->tail)
      chain->elementReads.push_back(other);
    chain->tail = out;
    if (!contains(chain->owned, out))
      chain->owned.push_back(out);
    written.push_back(out);
  }
  launch.rowLast = i;
  launch.lanes.erase(std::remove_if(launch.lanes.begin(), launch.lanes.end(),
                                    [](const Lane &l) { return l.segments.empty(); }),
                     launch.lanes.end());
  for (size_t p = launch.first; p < launch.rowFirst; ++p)
    launch.pre.push_back(p);
  for (size_t p = launch.rowLast; p < launch.last; ++p)
    launch.post.push_back(p);
  launch.kind = Launch::Kind::Rows;
  return true;
}

// How each program kernel's steps [first, last) run.
std::vector<Launch> planLaunches(const std::vector<Step> &steps) {
  std::vector<Launch> launches;
  for (size_t first = 0; first < steps.size();) {
    size_t last = first + 1;
    while (last < steps.size() && steps[last].kernelIndex == steps[first].kernelIndex)
      ++last;
    Launch launch;
    launch.first = first;
    launch.last = last;
    bool jitOnly = true;
    for (size_t i = first; i < last; ++i)
      jitOnly = jitOnly && !steps[i].upload && steps[i].fn;
    if (jitOnly && last - first > 1 && !matchAttention(steps, launch)) {
      Launch rows = launch;
      if (matchRows(steps, rows))
        launch = std::move(rows);
    }
    launches.push_back(std::move(launch));
    first = last;
  }
  return launches;
}

// Gives the segments of a row launch their fused kernels: an rms_norm prologue where the norm
// just before the loop feeds the anchors, and the element-wise epilogue. `compile` returns each
// spec's entry point (null where it failed); `specFor` is the compiler's single-op spec.
using SpecCompiler = std::function<std::vector<KernelFn>(const std::vector<KernelSpec> &,
                                                         const std::vector<OpCall> &)>;
using SpecMaker = std::function<KernelSpec(const OpCall &, uint8_t)>;
void fuseSegments(const std::vector<Step> &steps, Launch &launch, bool fusePrologue,
                  const SpecCompiler &compile, const SpecMaker &specFor, uint64_t *fusedKernels) {
  // The rms_norm just before the loop folds into every anchor whose x it writes when nothing else
  // in the loop touches its output and the loop does not write its inputs.
  const Step *norm = nullptr;
  if (fusePrologue && !launch.pre.empty()) {
    const Step &candidate = steps[launch.pre.back()];
    if (opOf(candidate).kind == OpKind::RmsNorm && candidate.fn && !isParam(candidate, 0))
      norm = &candidate;
  }
  std::vector<uint32_t> written, elementReads;
  for (size_t i = launch.rowFirst; i < launch.rowLast; ++i) {
    const Step &step = steps[i];
    int numBuffers = opInfo(opOf(step).kind).numBuffers;
    written.push_back(slotOf(step, numBuffers - 1));
    if (opOf(step).kind != OpKind::QuantizedMatmul)
      for (int b = 0; b + 1 < numBuffers; ++b)
        elementReads.push_back(slotOf(step, b));
  }
  auto contains = [](const std::vector<uint32_t> &v, uint32_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  if (norm) {
    uint32_t in = slotOf(*norm, 0), weight = slotOf(*norm, 1), out = slotOf(*norm, 2);
    if (out == in || out == weight || contains(written, in) || contains(written, weight) ||
        contains(written, out) || contains(elementReads, out))
      norm = nullptr;
  }
  if (norm)
    for (const Lane &lane : launch.lanes)
      for (const Segment &seg : lane.segments) {
        const Step &anchor = steps[seg.anchor];
        if (slotOf(anchor, 1) == slotOf(*norm, 2) &&
            (isParam(anchor, 1) || opOf(anchor).ints[1] != opOf(*norm).ints[0]))
          norm = nullptr; // a reader of the norm that cannot take the prologue
      }
  // False when a segment that reads the norm cannot take the prologue (then none may).
  auto buildSpecs = [&](bool withPrologue, std::vector<KernelSpec> *specs,
                        std::vector<std::vector<size_t>> *members) {
    bool stored = false, complete = true;
    for (const Lane &lane : launch.lanes)
      for (const Segment &seg : lane.segments) {
        const Step &anchor = steps[seg.anchor];
        bool prologue = withPrologue && slotOf(anchor, 1) == slotOf(*norm, 2);
        KernelSpec spec = specFor(opOf(anchor), paramMaskOf(anchor.op));
        std::vector<size_t> m;
        if (prologue) {
          spec.prologue.push_back(shapeOf(opOf(*norm), paramMaskOf(norm->op)));
          spec.unstoredOutputs = stored ? 1 : 0;
          stored = true;
          m.push_back(size_t(norm - steps.data()));
        }
        m.push_back(seg.anchor);
        for (size_t ep : seg.epilogue) {
          spec.epilogue.push_back(shapeOf(opOf(steps[ep]), paramMaskOf(steps[ep].op)));
          m.push_back(ep);
        }
        if (m.size() > kMaxFusedMembers) {
          complete = complete && !prologue;
          m.clear(); // a chain too long for FusedArgs: the member kernels
        }
        if (!prologue && seg.epilogue.empty())
          m.clear(); // nothing to fuse: the anchor's own kernel
        specs->push_back(std::move(spec));
        members->push_back(std::move(m));
      }
    return complete;
  };
  // Compiles the specs whose members are non-empty; false if any failed.
  auto compileSpecs = [&](const std::vector<KernelSpec> &specs,
                          const std::vector<std::vector<size_t>> &members,
                          std::vector<KernelFn> *fns) {
    std::vector<KernelSpec> wanted;
    std::vector<OpCall> ops;
    for (size_t i = 0; i < specs.size(); ++i)
      if (!members[i].empty()) {
        wanted.push_back(specs[i]);
        ops.push_back(opOf(steps[members[i][0]]));
      }
    std::vector<KernelFn> compiled =
        wanted.empty() ? std::vector<KernelFn>{} : compile(wanted, ops);
    bool allOk = true;
    for (size_t i = 0, j = 0; i < specs.size(); ++i) {
      fns->push_back(members[i].empty() ? nullptr : compiled[j++]);
      allOk = allOk && (members[i].empty() || fns->back());
    }
    return allOk;
  };
  std::vector<KernelSpec> specs;
  std::vector<std::vector<size_t>> members;
  std::vector<KernelFn> fns;
  bool prologue = norm != nullptr;
  bool complete = buildSpecs(prologue, &specs, &members);
  if ((!complete || !compileSpecs(specs, members, &fns)) && prologue) {
    // Without the prologue the norm runs before the loop as before; epilogues may still fuse.
    prologue = false;
    specs.clear();
    members.clear();
    fns.clear();
    buildSpecs(false, &specs, &members);
    compileSpecs(specs, members, &fns);
  }
  size_t i = 0;
  for (Lane &lane : launch.lanes)
    for (Segment &seg : lane.segments) {
      seg.fused = fns[i];
      if (seg.fused) {
        seg.members = members[i];
        ++*fusedKernels;
      }
      ++i;
    }
  if (prologue)
    launch.pre.pop_back();
}

class CpuPlan : public Plan {
public:
  CpuPlan(std::vector<Step> steps, std::vector<Launch> plan, size_t launches,
          std::string description, std::vector<std::shared_ptr<const CpuJitModule>> code,
          ThreadPool *pool, uint64_t minParallelBytes)
      : steps_(std::move(steps)), plan_(std::move(plan)), launches_(launches),
        description_(std::move(description)), code_(std::move(code)), pool_(pool),
        minParallelBytes_(minParallelBytes) {}

  absl::Status run(const PlanArgs &args) override {
    for (const Launch &launch : plan_) {
      switch (launch.kind) {
      case Launch::Kind::Serial:
        for (size_t i = launch.first; i < launch.last; ++i)
          runStep(steps_[i], args);
        break;
      case Launch::Kind::Rows:
        for (size_t i : launch.pre)
          runStep(steps_[i], args);
        runRows(launch, args);
        for (size_t i : launch.post)
          runStep(steps_[i], args);
        break;
      case Launch::Kind::Attention:
        runAttention(launch, args);
        break;
      }
    }
    return absl::OkStatus();
  }

  size_t numKernels() const override { return launches_; }
  std::string describe() const override { return description_; }

private:
  bool serial(uint64_t units, uint64_t bytes) const {
    return units <= 1 || bytes < minParallelBytes_ || pool_->size() == 1;
  }
  uint64_t grainOf(uint64_t units, uint64_t bytes) const {
    return std::max<uint64_t>(1, units * kMinChunkBytes / std::max<uint64_t>(bytes, 1));
  }

  void runStep(const Step &step, const PlanArgs &args) const {
    const TraceEntry &entry = step.op.entry;
    if (step.upload) {
      const std::vector<uint8_t> &bytes = *args.payloads[entry.payload];
      std::memcpy(args.slotData[entry.uploadSlot], bytes.data(), entry.uploadBytes);
      return;
    }
    if (!step.fn) {
      OpCall op = boundOp(step.op, args.params);
      executeReference(op, [&](BufferHandle h) { return args.slotData[Trace::slotOf(h)]; });
      return;
    }
    runKernel(step, args);
  }

  void runKernel(const Step &step, const PlanArgs &args) const {
    const OpCall &op = opOf(step);
    Bound b = bind(step, args);
    uint64_t units = parallelSize(op.kind, b.ints);
    if (units == 0)
      return;
    uint64_t bytes = workBytes(op.kind, op.dtype, b.ints);
    KernelFn fn = step.fn;
    if (serial(units, bytes)) {
      fn(b.buffers, b.ints, 0, static_cast<int64_t>(units));
      return;
    }
    pool_->parallelFor(
        units,
        [&](uint64_t begin, uint64_t end) {
          fn(b.buffers, b.ints, static_cast<int64_t>(begin), static_cast<int64_t>(end));
        },
        grainOf(units, bytes));
  }

  void runRows(const Launch &launch, const PlanArgs &args) const {
    absl::InlinedVector<Bound, 8> bound;
    for (size_t i = launch.rowFirst; i < launch.rowLast; ++i)
      bound.push_back(bind(steps_[i], args));
    auto at = [&](size_t step) -> const Bound & { return bound[step - launch.rowFirst]; };
    // The operand tables of the fused kernels: member m's buffers and integers at 3 m and 5 m.
    absl::InlinedVector<FusedArgs, 4> fusedArgs;
    absl::InlinedVector<size_t, 4> segmentBase;
    for (const Lane &lane : launch.lanes) {
      segmentBase.push_back(fusedArgs.size());
      for (const Segment &seg : lane.segments) {
        FusedArgs f{};
        for (size_t m = 0; m < seg.members.size(); ++m) {
          Bound member = bind(steps_[seg.members[m]], args);
          std::copy(member.buffers, member.buffers + 3, f.buffers + 3 * m);
          std::copy(member.ints, member.ints + 5, f.ints + 5 * m);
        }
        fusedArgs.push_back(f);
      }
    }
    absl::InlinedVector<uint64_t, 4> laneStart;
    uint64_t units = 0, bytes = 0;
    for (const Lane &lane : launch.lanes) {
      laneStart.push_back(units);
      units += static_cast<uint64_t>(at(lane.segments[0].anchor).ints[0]);
      for (const Segment &s : lane.segments)
        bytes +=
            workBytes(OpKind::QuantizedMatmul, opOf(steps_[s.anchor]).dtype, at(s.anchor).ints);
    }
    auto chunk = [&](uint64_t begin, uint64_t end) {
      for (size_t l = 0; l < launch.lanes.size(); ++l) {
        const Lane &lane = launch.lanes[l];
        uint64_t start = laneStart[l];
        uint64_t rows = static_cast<uint64_t>(at(lane.segments[0].anchor).ints[0]);
        uint64_t lo = std::max(begin, start), hi = std::min(end, start + rows);
        if (lo >= hi)
          continue;
        int64_t b = static_cast<int64_t>(lo - start), e = static_cast<int64_t>(hi - start);
        for (const Segment &s : lane.segments) {
          if (s.fused) {
            const FusedArgs &f = fusedArgs[&s - &lane.segments[0] + segmentBase[l]];
            s.fused(f.buffers, f.ints, b, e);
            continue;
          }
          const Bound &a = at(s.anchor);
          steps_[s.anchor].fn(a.buffers, a.ints, b, e);
          for (size_t ep : s.epilogue)
            steps_[ep].fn(at(ep).buffers, at(ep).ints, b, e);
        }
      }
    };
    if (units == 0)
      return;
    if (serial(units, bytes)) {
      chunk(0, units);
      return;
    }
    pool_->parallelFor(units, chunk, grainOf(units, bytes));
  }

  void runAttention(const Launch &launch, const PlanArgs &args) const {
    const size_t heads = launch.heads;
    thread_local std::vector<Bound> bound;
    thread_local std::vector<float> scratch;
    bound.resize(3 * heads);
    uint64_t bytes = 0, maxSeq = 0;
    bool grouped = true;
    for (size_t h = 0; h < heads; ++h) {
      for (int m = 0; m < 3; ++m)
        bound[3 * h + m] = bind(steps_[launch.first + 3 * h + m], args);
      const Bound &s = bound[3 * h], &sm = bound[3 * h + 1], &v = bound[3 * h + 2];
      // The scores' length must agree, or softmax / value would read the unfused order's stale
      // scores of an earlier head.
      grouped = grouped && s.ints[1] == sm.ints[0] && s.ints[1] == v.ints[1];
      maxSeq = std::max<uint64_t>(maxSeq, static_cast<uint64_t>(s.ints[1]));
      bytes += workBytes(OpKind::AttnScore, DType::F32, s.ints) +
               workBytes(OpKind::AttnValue, DType::F32, v.ints);
    }
    if (!grouped || serial(heads, bytes)) {
      for (size_t i = launch.first; i < launch.last; ++i)
        runStep(steps_[i], args);
      return;
    }
    if (scratch.size() < (heads - 1) * maxSeq)
      scratch.resize((heads - 1) * maxSeq);
    // The tasks run on other threads: they must see this thread's vectors, not their own.
    float *scratchBase = scratch.data();
    const Bound *boundBase = bound.data();
    auto runHeads = [&](uint64_t begin, uint64_t end) {
      for (uint64_t h = begin; h < end; ++h) {
        Bound s = boundBase[3 * h], sm = boundBase[3 * h + 1], v = boundBase[3 * h + 2];
        if (h + 1 < heads) {
          auto *mine = reinterpret_cast<uint8_t *>(scratchBase + h * maxSeq);
          s.buffers[2] = sm.buffers[0] = sm.buffers[1] = v.buffers[0] = mine;
        }
        const size_t step = launch.first + 3 * h;
        steps_[step].fn(s.buffers, s.ints, 0,
                        static_cast<int64_t>(parallelSize(OpKind::AttnScore, s.ints)));
        steps_[step + 1].fn(sm.buffers, sm.ints, 0, 1);
        steps_[step + 2].fn(v.buffers, v.ints, 0,
                            static_cast<int64_t>(parallelSize(OpKind::AttnValue, v.ints)));
      }
    };
    pool_->parallelFor(heads, runHeads, grainOf(heads, bytes));
  }

  std::vector<Step> steps_;
  std::vector<Launch> plan_;
  size_t launches_;
  std::string description_;
  /// The modules of every entry point above: the code lives while the plan does.
  std::vector<std::shared_ptr<const CpuJitModule>> code_;
  ThreadPool *pool_;
  uint64_t minParallelBytes_;
};

} // namespace

CpuCompiler::CpuCompiler(CpuCompilerOptions options, std::shared_ptr<CpuJit> jit)
    : options_(std::move(options)), jit_(std::move(jit)), cache_(options_.kernelCacheCapacity) {
  if (!options_.pool)
    options_.pool = &ThreadPool::shared();
}

CpuCompiler::~CpuCompiler() = default;

absl::StatusOr<std::unique_ptr<CpuCompiler>> CpuCompiler::create(CpuCompilerOptions options) {
  absl::StatusOr<std::unique_ptr<CpuJit>> jit = CpuJit::create();
  if (!jit.ok())
    return jit.status();
  return std::unique_ptr<CpuCompiler>(
      new CpuCompiler(std::move(options), std::shared_ptr<CpuJit>(std::move(*jit))));
}

KernelSpec CpuCompiler::specFor(const OpCall &op, uint8_t paramMask) const {
  KernelSpec spec = singleOpSpec(op, paramMask);
  spec.injectFailure = (options_.failCompile && options_.failCompile(op)) ||
                       runtime::fault::fires(runtime::fault::Site::KernelCompile);
  return spec;
}

std::string CpuCompiler::kernelName(const OpCall &op, uint8_t paramMask) {
  return singleOpSpec(op, paramMask).name();
}

std::vector<CpuCompiler::CachedKernel>
CpuCompiler::compileMissing(const std::vector<KernelSpec> &specs, const std::vector<OpCall> &ops) {
  std::vector<CachedKernel> out(specs.size());
  if (specs.empty())
    return out;
  absl::StatusOr<CpuJitKernels> batch = jit_->compile(specs);
  for (size_t i = 0; i < specs.size(); ++i) {
    CachedKernel &cached = out[i];
    cached.name = specs[i].name();
    if (batch.ok()) {
      cached.fn = batch->entries[i];
      cached.code = batch->code;
      ++stats_.kernelsCompiled;
      cache_.insert(specs[i].key(), cached);
      continue;
    }
    // Isolate the failure: every kernel that compiles alone still gets its code.
    absl::StatusOr<CpuJitKernels> single =
        specs.size() == 1 ? batch : jit_->compile({&specs[i], 1});
    if (single.ok()) {
      cached.fn = single->entries[0];
      cached.code = single->code;
      ++stats_.kernelsCompiled;
      cache_.insert(specs[i].key(), cached);
      continue;
    }
    ++stats_.fallbacks;
    if (options_.logFallbacks)
      std::fprintf(stderr,
                   "sinter: kernel %s (%s) failed to compile: %s; running it on the "
                   "reference kernel\n",
                   cached.name.c_str(), describeOp(ops[i]).c_str(),
                   std::string(single.status().message()).c_str());
    cache_.insert(specs[i].key(), cached);
  }
  return out;
}

std::vector<CpuCompiler::CachedKernel> CpuCompiler::kernelsFor(const std::vector<KernelSpec> &specs,
                                                               const std::vector<OpCall> &ops) {
  std::vector<CachedKernel> out(specs.size());
  std::vector<KernelSpec> missing;
  std::vector<OpCall> missingOps;
  absl::flat_hash_map<std::string, size_t> queued; // key -> index in missing
  std::vector<size_t> missingIndex(specs.size(), SIZE_MAX);
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string key = specs[i].key();
    if (const CachedKernel *cached = cache_.find(key)) {
      out[i] = *cached;
      ++stats_.cacheHits;
      continue;
    }
    auto [it, inserted] = queued.emplace(std::move(key), missing.size());
    if (inserted) {
      missing.push_back(specs[i]);
      missingOps.push_back(ops[i]);
    } else {
      ++stats_.cacheHits; // queued for an earlier op of this call
    }
    missingIndex[i] = it->second;
  }
  std::vector<CachedKernel> compiled = compileMissing(missing, missingOps);
  for (size_t i = 0; i < specs.size(); ++i)
    if (missingIndex[i] != SIZE_MAX)
      out[i] = compiled[missingIndex[i]];
  return out;
}

absl::StatusOr<std::unique_ptr<Plan>> CpuCompiler::compile(const Trace &trace,
                                                           const std::vector<IntSlot> &params) {
  return compileProgram(unfusedProgram(trace, params));
}

absl::StatusOr<std::unique_ptr<Plan>> CpuCompiler::compileProgram(const KernelProgram &program) {
  auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  // Pass 1: the steps and the specs of every member op that is not an upload.
  std::vector<Step> steps;
  std::vector<KernelSpec> specs;
  std::vector<OpCall> ops;
  size_t launches = 0;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const Kernel &kernel = program.kernels[k];
    launches += !kernel.hostCopy;
    for (const KernelMember &member : kernel.ops) {
      Step step;
      step.op = member;
      step.kernelIndex = k;
      step.upload = member.entry.kind == TraceEntry::Kind::Upload;
      if (!step.upload) {
        specs.push_back(specFor(member.entry.op, paramMaskOf(member)));
        ops.push_back(member.entry.op);
      }
      steps.push_back(std::move(step));
    }
  }
  // The kernels, compiling the missing ones together; the plan keeps each one's module.
  std::vector<std::shared_ptr<const CpuJitModule>> code;
  absl::flat_hash_set<const CpuJitModule *> held;
  auto hold = [&](const CachedKernel &kernel) {
    if (kernel.code && held.insert(kernel.code.get()).second)
      code.push_back(kernel.code);
  };
  std::vector<CachedKernel> kernels = kernelsFor(specs, ops);
  // Pass 2: bind entry points and describe the plan.
  std::string description;
  for (size_t i = 0, next = 0; i < steps.size(); ++i) {
    Step &step = steps[i];
    const Kernel &kernel = program.kernels[step.kernelIndex];
    if (step.upload) {
      absl::StrAppend(&description, "host copy ", step.kernelIndex, ": slot ",
                      step.op.entry.uploadSlot, " ", step.op.entry.uploadBytes, " bytes\n");
      continue;
    }
    const CachedKernel &cached = kernels[next++];
    hold(cached);
    step.fn = cached.fn;
    step.kernelName = cached.name;
    absl::StrAppend(&description, "kernel ", step.kernelIndex, " ", kernel.name, ": ",
                    step.fn ? "jit " : "reference (failed to compile) ", cached.name, ": ",
                    describeOp(step.op.entry.op), "\n");
  }
  std::vector<Launch> plan = planLaunches(steps);
  for (Launch &launch : plan)
    if (launch.kind == Launch::Kind::Rows)
      fuseSegments(
          steps, launch, options_.fusePrologue,
          [&](const std::vector<KernelSpec> &fused, const std::vector<OpCall> &fusedOps) {
            std::vector<KernelFn> fns;
            for (const CachedKernel &kernel : kernelsFor(fused, fusedOps)) {
              hold(kernel);
              fns.push_back(kernel.fn);
            }
            return fns;
          },
          [this](const OpCall &op, uint8_t mask) { return specFor(op, mask); },
          &stats_.fusedKernels);
  for (const Launch &launch : plan) {
    if (launch.kind == Launch::Kind::Attention) {
      ++stats_.headLoops;
      absl::StrAppend(&description, "kernel ", steps[launch.first].kernelIndex,
                      ": one parallel loop over ", launch.heads, " heads\n");
    } else if (launch.kind == Launch::Kind::Rows && launch.rowLast - launch.rowFirst > 1) {
      ++stats_.rowLoops;
      size_t segments = 0, fused = 0;
      for (const Lane &lane : launch.lanes)
        for (const Segment &seg : lane.segments) {
          ++segments;
          fused += seg.fused != nullptr;
        }
      absl::StrAppend(&description, "kernel ", steps[launch.first].kernelIndex,
                      ": one parallel loop over the rows of ", segments,
                      " quantized_matmul(s) with ", launch.rowLast - launch.rowFirst - segments,
                      " epilogue op(s); ", fused, " fused kernel(s)",
                      launch.pre.empty() || opOf(steps[launch.pre.back()]).kind != OpKind::RmsNorm
                          ? ""
                          : " (rms_norm before the loop)",
                      "\n");
    }
  }
  ++stats_.plans;
  stats_.compileSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::unique_ptr<Plan>(new CpuPlan(std::move(steps), std::move(plan), launches,
                                           std::move(description), std::move(code), options_.pool,
                                           options_.minParallelBytes));
}

absl::StatusOr<std::string> CpuCompiler::kernelIR(const OpCall &op, uint8_t paramMask,
                                                  bool optimized) {
  return jit_->llvmIR(specFor(op, paramMask), optimized);
}

absl::StatusOr<std::string> CpuCompiler::kernelAsm(const OpCall &op, uint8_t paramMask) {
  return jit_->assembly(specFor(op, paramMask));
}

absl::StatusOr<std::string> CpuCompiler::specIR(const KernelSpec &spec, bool optimized) {
  return jit_->llvmIR(spec, optimized);
}

absl::StatusOr<std::string> CpuCompiler::specAsm(const KernelSpec &spec) {
  return jit_->assembly(spec);
}

std::vector<CpuKernelFunctions> CpuCompiler::functionsOf(const KernelProgram &program) {
  // compileProgram's planning with every kernel taken as compiled (a dummy entry point).
  const KernelFn compiled = [](uint8_t *const *, const int64_t *, int64_t, int64_t) {};
  std::vector<Step> steps;
  for (size_t k = 0; k < program.kernels.size(); ++k)
    for (const KernelMember &member : program.kernels[k].ops) {
      Step step;
      step.op = member;
      step.kernelIndex = k;
      step.upload = member.entry.kind == TraceEntry::Kind::Upload;
      step.fn = step.upload ? nullptr : compiled;
      steps.push_back(std::move(step));
    }
  std::vector<Launch> plan = planLaunches(steps);
  std::vector<KernelSpec> fusedSpecs;
  std::vector<int> fusedOf(steps.size(), -1);
  uint64_t ignored = 0;
  for (Launch &launch : plan) {
    if (launch.kind != Launch::Kind::Rows)
      continue;
    std::vector<KernelSpec> specs;
    fuseSegments(
        steps, launch, options_.fusePrologue,
        [&](const std::vector<KernelSpec> &wanted, const std::vector<OpCall> &) {
          specs = wanted;
          return std::vector<KernelFn>(wanted.size(), compiled);
        },
        [this](const OpCall &op, uint8_t mask) { return specFor(op, mask); }, &ignored);
    size_t next = 0;
    for (const Lane &lane : launch.lanes)
      for (const Segment &seg : lane.segments) {
        if (!seg.fused)
          continue;
        for (size_t m : seg.members) // the prologue's: the kernel that stores its output
          if (fusedOf[m] < 0)
            fusedOf[m] = static_cast<int>(fusedSpecs.size());
        fusedSpecs.push_back(specs[next++]);
      }
  }
  std::vector<CpuKernelFunctions> out(program.kernels.size());
  std::vector<absl::flat_hash_map<std::string, int>> indexOf(program.kernels.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    CpuKernelFunctions &k = out[steps[i].kernelIndex];
    if (steps[i].upload) {
      k.memberFunction.push_back(-1);
      continue;
    }
    KernelSpec spec = fusedOf[i] >= 0 ? fusedSpecs[fusedOf[i]]
                                      : specFor(opOf(steps[i]), paramMaskOf(steps[i].op));
    auto [it, inserted] =
        indexOf[steps[i].kernelIndex].emplace(spec.key(), static_cast<int>(k.specs.size()));
    if (inserted)
      k.specs.push_back(std::move(spec));
    k.memberFunction.push_back(it->second);
  }
  return out;
}

CpuCompilerStats CpuCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CpuCompilerStats s = stats_;
  s.cachedKernels = cache_.size();
  s.evictions = cache_.evictions();
  s.jit = jit_->times();
  return s;
}

} // namespace sinter::codegen
