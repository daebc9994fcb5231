// ModelFile.h - open a model file of either format the driver reads.
//
// GGUF files are recognised by their magic; anything else is read as a llama2.c checkpoint, and
// when that fails too the error says both.
#ifndef SINTER_TOOLS_MODEL_MODELFILE_H
#define SINTER_TOOLS_MODEL_MODELFILE_H

#include <string>

#include "absl/status/statusor.h"
#include "tools/model/ModelWeights.h"

namespace sinter::model {

/// Loads a GGUF file or a llama2.c checkpoint. `isGguf`, when given, tells which it was.
absl::StatusOr<ModelWeights> loadModelFile(const std::string &path, bool *isGguf = nullptr);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_MODELFILE_H
