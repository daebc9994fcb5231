// Llama2cLoader.h - reads llama2.c checkpoints (Karpathy's run.c format, f32).
//
// Format: seven little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size,
// seq_len; a negative vocab_size means a separate classifier follows), then the f32 tensors, each
// kind for all layers at once (../shared/models/README.md). Rope base 10000 and eps 1e-5 are
// implied by the format.
#ifndef SINTER_TOOLS_MODEL_LLAMA2CLOADER_H
#define SINTER_TOOLS_MODEL_LLAMA2CLOADER_H

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tools/model/ModelWeights.h"

namespace sinter::model {

/// The model in a llama2.c checkpoint held in `bytes`. InvalidArgument when the header is not a
/// usable shape or the size of `bytes` is not exactly what the header implies (both numbers in the
/// message).
absl::StatusOr<ModelWeights> parseLlama2c(absl::Span<const uint8_t> bytes);

/// parseLlama2c on the file at `path` (errors prefixed with the path).
absl::StatusOr<ModelWeights> loadLlama2c(const std::string &path);

/// The bytes of a llama2.c checkpoint of `weights` (all tensors must be F32; the rope tables are
/// written as zeros, run.c ignores them). Used by tests to make checkpoints.
absl::StatusOr<std::vector<uint8_t>> serializeLlama2c(const ModelWeights &weights);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_LLAMA2CLOADER_H
