// WarmDecoder.h - the decoder the decode benchmarks time: created, then stepped at the positions
// just before the timed one, so the timed steps replay compiled plans.
#ifndef SINTER_BENCH_WARMDECODER_H
#define SINTER_BENCH_WARMDECODER_H

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "sinter/Status.h"
#include "tools/model/Decoder.h"

namespace sinter::bench {

/// A decoder of `weights` on `backend` with room for `position` + 1 tokens, after steps at
/// positions `position` - 2 .. `position` with a different token each (the position and the
/// token's embedding row are plan parameters, so these compile what a timed step at any position
/// and token replays: a timed loop that changes them finds its plan, instead of compiling it
/// again on its first step). `logits` is resized to the vocabulary.
inline absl::StatusOr<std::unique_ptr<model::Decoder>>
warmDecoder(ComputeBackend &backend, const model::ModelWeights &weights, uint32_t position,
            std::vector<float> &logits) {
  model::DecoderOptions options;
  options.maxContext = position + 1;
  SINTER_ASSIGN_OR_RETURN(std::unique_ptr<model::Decoder> decoder,
                          model::Decoder::create(backend, weights, options));
  logits.resize(weights.config.vocabSize);
  for (uint32_t pos = position >= 2 ? position - 2 : 0; pos <= position; ++pos)
    SINTER_RETURN_IF_ERROR(decoder->step(1 + pos % 3, pos, absl::MakeSpan(logits)));
  return decoder;
}

} // namespace sinter::bench

#endif // SINTER_BENCH_WARMDECODER_H
