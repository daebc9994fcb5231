// MappedFile.h - a read-only view of a whole file (mmap), for the model loaders.
//
// Loaders parse from a byte span, so the same code serves files, in-memory buffers and the fuzzer;
// mapping the file avoids holding a second copy of a multi-gigabyte model while it is parsed.
#ifndef SINTER_TOOLS_MODEL_MAPPEDFILE_H
#define SINTER_TOOLS_MODEL_MAPPEDFILE_H

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sinter::model {

/// A file mapped read-only; the bytes stay valid while the object lives.
class MappedFile {
public:
  /// Maps `path`. NotFound when it does not exist, PermissionDenied / Internal for other failures;
  /// an empty file gives an empty span.
  static absl::StatusOr<std::unique_ptr<MappedFile>> open(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  absl::Span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string &path() const { return path_; }

private:
  MappedFile() = default;
  std::string path_;
  const uint8_t *data_ = nullptr;
  uint64_t size_ = 0;
};

/// Writes `bytes` to `path` (replacing it). Internal / PermissionDenied with the path on failure.
absl::Status writeFile(const std::string &path, absl::Span<const uint8_t> bytes);

} // namespace sinter::model

#endif // SINTER_TOOLS_MODEL_MAPPEDFILE_H
