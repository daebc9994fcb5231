// GgufModel.h - maps between GGUF files of the llama architecture and ModelWeights.
//
// Keys read: general.architecture ("llama"), llama.embedding_length, llama.block_count,
// llama.feed_forward_length, llama.attention.head_count, llama.attention.head_count_kv (default:
// head_count), llama.rope.freq_base (10000), llama.attention.layer_norm_rms_epsilon (1e-5),
// llama.context_length (2048), tokenizer.ggml.tokens (optional vocabulary).
//
// Rope: Q and K weights are used as stored. llama.cpp's converters permute the Q/K rows of HF
// checkpoints so that ggml's "normal" rope (LLAMA_ROPE_TYPE_NORM: interleaved pairs (2i, 2i+1))
// applies, which is exactly SEMANTICS.md's rope; llama2.c checkpoints (Meta's layout) need no
// permutation either, so the writer stores them unpermuted. A GGUF file whose Q/K rows are still
// in HF's rotate-half order would decode wrongly; llama.cpp never writes such files for "llama".
#ifndef SINTER_TOOLS_MODEL_GGUFMODEL_H
#define SINTER_TOOLS_MODEL_GGUFMODEL_H

#include <string>

#include "absl/status/statusor.h"
#include "tools/model/Gguf.h"
#include "tools/model/ModelWeights.h"

namespace sinter::model {

/// The model in a parsed GGUF file (tensor bytes are copied). Errors start with "gguf: ":
/// Unimplemented for an architecture other than llama or a tensor dtype that is not a supported
/// weight format; InvalidArgument for a missing or mistyped key, a missing tensor, or a tensor
/// whose dims do not match the model's shape.
absl::StatusOr<ModelWeights> modelFromGguf(const GgufFile &file);

/// A GgufFile describing `weights` (tensors point into `weights`, which must outlive it), with
/// general.name `name`, general.alignment 32, the llama.* keys and, when the model has one, the
/// vocabulary.
GgufFile ggufFromModel(const ModelWeights &weights, const std::string &name);

/// Parses and loads the GGUF model at `path` (errors prefixed with the path).
absl::StatusOr<ModelWeights> loadGguf(const std::string &path);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_GGUFMODEL_H
