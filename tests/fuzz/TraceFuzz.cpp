// TraceFuzz.cpp - libFuzzer target: the .mlir trace reader (parse, verify, fusion pipeline,
// program extraction) on any text.
//
// This is what `sinter-dump --trace file.mlir` and a user's bug report go through. The libraries
// under test (ir/, passes/) and MLIR itself are the main build's, compiled by g++ and not
// instrumented; only this harness is built by clang (-fsanitize=fuzzer,address: ASan's allocator
// still catches double and invalid frees everywhere, but not overflows inside uninstrumented
// code, and coverage feedback comes from the harness only). Beyond "no crash": a rejected text
// gets a message, and a program that comes out names only parameters that exist. Each input runs
// with every fusion pattern on and with all of them off.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "passes/FusionCompiler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  for (const char *disabled : {"", "all"}) {
    sinter::passes::FusionOptions options;
    if (*disabled)
      options.disabled.push_back(disabled);
    absl::StatusOr<sinter::KernelProgram> program = sinter::passes::compileMlirText(text, options);
    if (!program.ok()) {
      if (program.status().message().empty())
        std::abort(); // an error must say what is wrong
      continue;
    }
    for (const sinter::Kernel &kernel : program->kernels)
      for (const sinter::KernelMember &member : kernel.ops)
        for (int32_t p : member.paramOf)
          if (p >= 0 && size_t(p) >= program->numParams) {
            std::fprintf(stderr, "TraceFuzz: kernel %s uses parameter %d of %zu\n",
                         kernel.name.c_str(), p, program->numParams);
            std::abort();
          }
  }
  return 0;
}
