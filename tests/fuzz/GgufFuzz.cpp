// GgufFuzz.cpp - libFuzzer target: the GGUF parser and the llama model builder on any bytes.
//
// Built with clang -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt). Beyond "no
// crash", it checks two invariants: every tensor a parsed file names lies inside the input, and a
// model that loads serializes and parses again to the same weights.
#include <cstdint>
#include <cstdlib>

#include "tools/model/GgufModel.h"
#include "tools/model/GgufReader.h"
#include "tools/model/GgufWriter.h"

using namespace sinter::model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  absl::StatusOr<GgufFile> file = parseGguf(absl::Span<const uint8_t>(data, size));
  if (!file.ok())
    return 0;
  for (const GgufTensor &t : file->tensors) {
    if (t.data.size() > 0 && (t.data.data() < data || t.data.data() + t.data.size() > data + size))
      std::abort();
  }
  absl::StatusOr<ModelWeights> weights = modelFromGguf(*file);
  if (!weights.ok())
    return 0;
  if (!validateWeights(*weights).ok())
    std::abort();
  absl::StatusOr<std::vector<uint8_t>> again = serializeGguf(ggufFromModel(*weights, "fuzz"));
  if (!again.ok())
    std::abort();
  absl::StatusOr<GgufFile> reparsed = parseGguf(*again);
  if (!reparsed.ok())
    std::abort();
  absl::StatusOr<ModelWeights> back = modelFromGguf(*reparsed);
  if (!back.ok() || !(back->config == weights->config) ||
      !(back->tokenEmbedding == weights->tokenEmbedding))
    std::abort();
  return 0;
}
