// SpirvDis.cpp - sinter-spirv-dis: prints the SPIR-V of one generated kernel (for lit tests).
//
//   sinter-spirv-dis <op> [int ...] [--dtype=Q4_0] [--scalar=1e-5] [--params=MASK]
//                    [--subgroup=32] [--no-opt]
//
// <op> is SEMANTICS.md's name (rms_norm, quantized_matmul, ...), the integers are the op's in
// order, MASK (binary or decimal) marks those read at run time. The output is a header of
// comment lines (kernel name, workgroup size, bindings, push constants) and spirv-dis's text.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "codegen/spirv/SpirvCompiler.h"
#include "sinter/DType.h"
#include "support/Ops.h"

using namespace sinter;

namespace {

int usage(const char *message) {
  std::fprintf(stderr,
               "sinter-spirv-dis: %s\nusage: sinter-spirv-dis <op> [int ...] "
               "[--dtype=NAME] [--scalar=F] [--params=MASK] [--subgroup=N] [--no-opt]\n",
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
    } else if (arg == "--no-opt") {
      target.optimize = false;
    } else if (numInts < info.numInts) {
      op.ints[numInts++] = std::strtoull(argv[a], nullptr, 10);
    } else {
      return usage("too many arguments");
    }
  }
  absl::StatusOr<codegen::SpirvKernel> k =
      codegen::buildSpirvKernel(codegen::singleOpSpec(op, paramMask), target);
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
  std::printf("\n; push constants %u bytes\n%s", k->pushConstantBytes(), text->c_str());
  return 0;
}
