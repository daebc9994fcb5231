// Messages.h - checks on the text of error messages shared by the tests.
#ifndef SINTER_TESTS_SUPPORT_MESSAGES_H
#define SINTER_TESTS_SUPPORT_MESSAGES_H

#include <cinttypes>
#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sinter::test {

/// False when `message` prints a byte range "[begin, end)" that wrapped (end <= begin) or a
/// count saturated at 2^64 - 1 as if it were a size ("needs 18446744073709551615").
inline bool printsNoWrappedRange(absl::string_view message) {
  if (absl::StrContains(message, absl::StrCat("needs ", ~0ull)))
    return false;
  size_t at = message.find("bytes [");
  if (at == absl::string_view::npos)
    return true;
  uint64_t begin = 0, end = 0;
  std::string range(message.substr(at + 7));
  if (std::sscanf(range.c_str(), "%" SCNu64 ", %" SCNu64 ")", &begin, &end) != 2)
    return false;
  return begin < end;
}

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_MESSAGES_H
