// MappedFile.cpp - mmap-based read-only file views and a plain file writer.
//
// POSIX only (the project targets Linux); errors carry the path and strerror.
#include "tools/model/MappedFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace sinter::model {
namespace {

absl::Status errnoError(const std::string &what, const std::string &path, int err) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT)
    return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM)
    return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

} // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::open(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errnoError("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return errnoError("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not a regular file: ", path));
  }
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = uint64_t(st.st_size);
  if (file->size_ > 0) {
    void *p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return errnoError("cannot map", path, err);
    }
    file->data_ = static_cast<const uint8_t *>(p);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_)
    ::munmap(const_cast<uint8_t *>(data_), size_);
}

absl::Status writeFile(const std::string &path, absl::Span<const uint8_t> bytes) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return errnoError("cannot create", path, errno);
  const size_t n = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  const int writeErr = errno;
  if (std::fclose(f) != 0 || n != bytes.size())
    return errnoError("cannot write", path, n != bytes.size() ? writeErr : errno);
  return absl::OkStatus();
}

} // namespace sinter::model
