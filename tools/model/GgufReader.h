// GgufReader.h - parses GGUF v2/v3 files (little-endian) into a GgufFile.
//
// The parser trusts nothing in the file: every read is bounds-checked, every count and length is
// capped by the bytes that remain before anything is allocated from it, and every tensor must lie
// inside the data section. It is the target of the libFuzzer test (tests/fuzz/).
#ifndef SINTER_TOOLS_MODEL_GGUFREADER_H
#define SINTER_TOOLS_MODEL_GGUFREADER_H

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tools/model/Gguf.h"

namespace sinter::model {

/// The header, metadata and tensor infos of the GGUF file in `bytes`; each tensor's `data` points
/// into `bytes`, which must outlive the result. Errors (messages start with "gguf: " and give file
/// offsets and sizes):
/// - InvalidArgument: bad magic, truncated data, a string or count larger than the file, an
///   unknown metadata value type, array nesting deeper than 8, duplicate keys or tensor names, a
///   general.alignment that is not a power of two, more than 4 dims, a row length that is not a
///   whole number of blocks, a misaligned tensor offset, a tensor past the end of the file;
/// - Unimplemented: a version other than 2 or 3, a tensor type id that names no known format.
absl::StatusOr<GgufFile> parseGguf(absl::Span<const uint8_t> bytes);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_GGUFREADER_H
