// ModelSource.h - the model a tool runs: a file (llama2.c or GGUF) or a synthetic preset, with
// its matrices requantized on request; loaded and described the same way by every tool.
#ifndef SINTER_TOOLS_COMMON_MODELSOURCE_H
#define SINTER_TOOLS_COMMON_MODELSOURCE_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sinter/DType.h"
#include "tools/model/ModelWeights.h"

namespace sinter::tools {

/// Where the model comes from.
struct ModelSource {
  std::string path;      ///< --model
  std::string synthetic; ///< --synthetic
  /// --dtype: of a synthetic model (default f32), or to requantize to; a dtype or a mix (q4_k_m)
  std::optional<model::WeightFormat> dtype;
  uint64_t seed = 1; ///< --seed (synthetic weights)
};

/// InvalidArgument unless exactly one of path and synthetic is given, and a synthetic preset is
/// one of model::presets() (listing them): what a tool checks before it does any work.
absl::Status checkModelSource(const ModelSource &source);

/// A loaded model and what loading it took.
struct LoadedModel {
  model::ModelWeights weights;
  /// "PATH (GGUF): <config>; matrices q4_0, 12.3 MB" or "synthetic PRESET (seed 1): ...".
  std::string description;
  /// Short, for tables: the file's name or the preset's, with the matrices' dtype.
  std::string shortName;
  double seconds = 0; ///< reading (or generating) and requantizing
  uint64_t bytes = 0; ///< the tensors' bytes
  bool gguf = false;  ///< a GGUF file (else llama2.c, or synthetic)
  /// Matrices that kept their format under --dtype (rows not whole blocks).
  std::vector<std::string> kept;
};

absl::StatusOr<LoadedModel> loadModel(const ModelSource &source);

} // namespace sinter::tools

#endif // SINTER_TOOLS_COMMON_MODELSOURCE_H
