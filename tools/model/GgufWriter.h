// GgufWriter.h - serializes a GgufFile as GGUF v3.
//
// Tensors are laid out in the order given, each at the next multiple of the alignment; the
// offsets stored in the GgufFile are ignored and recomputed. Serializing the result of parseGguf
// of a file this writer produced gives the same bytes.
#ifndef SINTER_TOOLS_MODEL_GGUFWRITER_H
#define SINTER_TOOLS_MODEL_GGUFWRITER_H

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/model/Gguf.h"

namespace sinter::model {

/// The header, metadata and tensor infos (up to the start of the data section, padding included),
/// with each tensor's offset. InvalidArgument when a tensor's data size does not match its dims
/// and dtype, when general.alignment disagrees with file.alignment, or when an array's count does
/// not match its elements.
absl::StatusOr<std::vector<uint8_t>> serializeGgufHeader(const GgufFile &file,
                                                         std::vector<uint64_t> *offsets);

/// The whole file in memory.
absl::StatusOr<std::vector<uint8_t>> serializeGguf(const GgufFile &file);

/// Writes the file to `path` without building it in memory first.
absl::Status writeGguf(const GgufFile &file, const std::string &path);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_GGUFWRITER_H
