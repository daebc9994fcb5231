// SpirvDis.cpp - sinter-spirv-dis: prints the SPIR-V of one generated kernel (for lit tests).
//
//   sinter-spirv-dis <op> [int ...] [--dtype=Q4_0] [--scalar=1e-5] [--params=MASK]
//                    [--subgroup=32] [--no-opt] [--rms-prologue] [--epilogue=add,silu,...]
//                    [--attention] [--attn-split=N] [--int-dot] [--params-buffer]
//
// <op> is SEMANTICS.md's name (rms_norm, quantized_matmul, ...), the integers are the op's in
// order, MASK (binary or decimal) marks those read at run time. The output is a header of
// comment lines (kernel name, workgroup size, bindings, push constants) and spirv-dis's text.
// Fused kernels: --rms-prologue puts an rms_norm of n_cols elements before a quantized_matmul,
// --epilogue chains element-wise ops after it, or a projection's rope and cache copy (a first
// quantized_matmul is a sibling product of the anchor's shape: gate and up); --attention
// makes an attn_score the anchor of the attention kernel over heads (softmax and attn_value of the
// same head_dim as its epilogue).
// --int-dot builds for a device with integer dot products (32 KB of workgroup memory).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"

#include "codegen/spirv/SpirvCompiler.h"
#include "sinter/DType.h"
#include "support/Ops.h"

using namespace sinter;

namespace {

int usage(const char *message) {
  std::fprintf(stderr,
               "sinter-spirv-dis: %s\nusage: sinter-spirv-dis <op> [int ...] "
               "[--dtype=NAME] [--scalar=F] [--params=MASK] [--subgroup=N] [--no-opt] "
               "[--rms-prologue] [--epilogue=OPS] [--attention] [--attn-split=N] [--int-dot] "
               "[--params-buffer]\n",
               message);
  return 2;
}

const char *bindingName(codegen::SpirvBindingKind kind) {
  switch (kind) {
  case codegen::SpirvBindingKind::F32:
    return "f32";
  case codegen::SpirvBindingKind::Word:
    return "u32";
  case codegen::SpirvBindingKind::Vec4:
    return "vec4";
  }
  return "?";
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usage("missing the op");
  OpCall op;
  bool found = false;
  for (int k = 0; k < kNumOpKinds; ++k)
    if (std::strcmp(opInfo(OpKind(k)).name, argv[1]) == 0) {
      op.kind = OpKind(k);
      found = true;
    }
  if (!found)
    return usage("unknown op");
  const OpInfo &info = opInfo(op.kind);
  for (int i = 0; i < info.numBuffers; ++i)
    op.buffers[i] = BufferHandle{uint64_t(i + 1)};
  uint8_t paramMask = 0;
  codegen::SpirvTarget target;
  int numInts = 0;
  bool rmsPrologue = false, attention = false;
  std::vector<OpKind> epilogue;
  for (int a = 2; a < argc; ++a) {
    std::string arg = argv[a];
    auto value = [&](const char *flag) -> const char * {
      size_t n = std::strlen(flag);
      return arg.compare(0, n, flag) == 0 ? argv[a] + n : nullptr;
    };
    if (const char *v = value("--dtype=")) {
      bool ok = false;
      for (uint32_t id = 0; id < 64; ++id)
        if (const DTypeInfo *d = lookupDType(id); d && std::strcmp(d->name, v) == 0) {
          op.dtype = d->dtype;
          ok = true;
        }
      if (!ok)
        return usage("unknown dtype");
    } else if (const char *v = value("--scalar=")) {
      op.scalar = std::strtof(v, nullptr);
    } else if (const char *v = value("--params=")) {
      paramMask = static_cast<uint8_t>(std::strtoul(v[0] == '0' && v[1] == 'b' ? v + 2 : v, nullptr,
                                                    v[0] == '0' && v[1] == 'b' ? 2 : 10));
    } else if (const char *v = value("--subgroup=")) {
      target.subgroupSize = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (arg.rfind("--attn-split=", 0) == 0) {
      target.attentionSplits = static_cast<uint32_t>(std::atoi(arg.c_str() + 13));
    } else if (arg == "--int-dot") {
      target.intDot = true;
      target.maxSharedMemoryBytes = 32768;
    } else if (arg == "--params-buffer") {
      target.paramsInBuffer = true;
    } else if (arg == "--no-opt") {
      target.optimize = false;
    } else if (arg == "--rms-prologue") {
      rmsPrologue = true;
    } else if (arg == "--attention") {
      attention = true;
    } else if (const char *v = value("--epilogue=")) {
      for (absl::string_view name : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        bool known = false;
        for (OpKind kind : {OpKind::Silu, OpKind::Add, OpKind::ElementMul, OpKind::Rope,
                            OpKind::CopyBufferOffset, OpKind::QuantizedMatmul})
          if (name == opInfo(kind).name) {
            epilogue.push_back(kind);
            known = true;
          }
        if (!known)
          return usage("an epilogue op is silu, add, element_mul, rope, copy_buffer_offset or "
                       "quantized_matmul (a sibling product of the anchor's shape)");
      }
    } else if (numInts < info.numInts) {
      op.ints[numInts++] = std::strtoull(argv[a], nullptr, 10);
    } else {
      return usage("too many arguments");
    }
  }
  codegen::KernelSpec spec = codegen::singleOpSpec(op, paramMask);
  BufferHandle b{1};
  if (rmsPrologue)
    spec.prologue.push_back(
        codegen::shapeOf(ops::rmsNorm(b, b, b, uint32_t(op.ints[1]), 1e-5f), 0));
  // rope: head_dim 128 and a run-time pos (a projection's tail); copy_buffer_offset: the rows
  // into a cache at a run-time dst_offset.
  const uint32_t rows = uint32_t(op.ints[0]);
  for (OpKind kind : epilogue)
    spec.epilogue.push_back(
        kind == OpKind::QuantizedMatmul ? codegen::shapeOf(op, paramMask)
        : kind == OpKind::Rope ? codegen::shapeOf(ops::rope(b, b, 0, 128, 1e4f, rows / 128, 0), 0b1)
        : kind == OpKind::CopyBufferOffset
            ? codegen::shapeOf(ops::copyBufferOffset(b, b, 0, 0, 4 * rows), 0b10)
            : codegen::shapeOf(kind == OpKind::Silu  ? ops::silu(b, b, rows)
                               : kind == OpKind::Add ? ops::add(b, b, b, rows)
                                                     : ops::elementMul(b, b, b, rows),
                               0));
  if (attention) {
    uint32_t headDim = uint32_t(op.ints[0]);
    spec.epilogue = {codegen::shapeOf(ops::softmax(b, b, 1), 0b1),
                     codegen::shapeOf(ops::attnValue(b, b, b, headDim, 1, 0, headDim, 0), 0b11110)};
    spec.attentionOverHeads = true;
  }
  absl::StatusOr<codegen::SpirvKernel> k = codegen::buildSpirvKernel(spec, target);
  if (!k.ok()) {
    std::fprintf(stderr, "sinter-spirv-dis: %s\n", k.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::string> text = codegen::disassembleSpirv(k->words);
  if (!text.ok()) {
    std::fprintf(stderr, "sinter-spirv-dis: %s\n", text.status().ToString().c_str());
    return 1;
  }
  std::printf("; kernel %s\n; local_size %u %u %u, %u units per workgroup\n", k->name.c_str(),
              k->localSize[0], k->localSize[1], k->localSize[2], k->unitsPerGroup);
  std::printf("; bindings");
  for (codegen::SpirvBindingKind b : k->bindings)
    std::printf(" %s", bindingName(b));
  if (k->paramsInBuffer)
    std::printf(" params(%u words)", k->paramWords());
  std::printf("\n; push constants %u bytes\n%s", k->pushConstantBytes(), text->c_str());
  return 0;
}
