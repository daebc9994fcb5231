// TiledWeights.cpp - GGUF Q4_0 to and from the tiled layout (TiledWeights.h).
#include "codegen/TiledWeights.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sinter::codegen {
namespace {

constexpr int64_t kBlockBytes = 18, kQuantBytes = 16;

absl::Status checkShape(const char *what, size_t have, int64_t nRows, int64_t nCols) {
  if (!canTileQ4_0(nRows, nCols))
    return absl::InvalidArgumentError(absl::StrCat(what, ": a Q4_0 matrix of ", nRows, " x ", nCols,
                                                   " has no tiled layout (rows a multiple of ",
                                                   kTileRows, ", columns of 32)"));
  const uint64_t need = uint64_t(nRows) * uint64_t(nCols / 32) * kBlockBytes;
  if (have < need)
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", have, " bytes for ", nRows, " x ", nCols, " Q4_0, need ", need));
  return absl::OkStatus();
}

// Byte offsets of (row, block)'s quants and scale in the tiled layout.
struct TiledAt {
  uint64_t quants, scale;
};
TiledAt tiledAt(int64_t row, int64_t block, int64_t nRows, int64_t nBlocks) {
  const uint64_t q = uint64_t((row / kTileRows) * nBlocks + block) * kTileRows + row % kTileRows;
  return {kQuantBytes * q, uint64_t(kQuantBytes) * nRows * nBlocks + 2 * q};
}

// GGUF's bytes to the tiled layout (toTiled) or back: each block's scale and quants copied
// between its GGUF place and its tiled one.
absl::StatusOr<std::vector<uint8_t>> relayout(const char *what, absl::Span<const uint8_t> in,
                                              int64_t nRows, int64_t nCols, bool toTiled) {
  if (absl::Status s = checkShape(what, in.size(), nRows, nCols); !s.ok())
    return s;
  const int64_t nBlocks = nCols / 32;
  std::vector<uint8_t> out(uint64_t(nRows) * nBlocks * kBlockBytes);
  for (int64_t r = 0; r < nRows; ++r)
    for (int64_t b = 0; b < nBlocks; ++b) {
      const uint64_t gguf = (uint64_t(r) * nBlocks + b) * kBlockBytes;
      const TiledAt at = tiledAt(r, b, nRows, nBlocks);
      const uint64_t scale = toTiled ? at.scale : gguf, scaleFrom = toTiled ? gguf : at.scale;
      const uint64_t quants = toTiled ? at.quants : gguf + 2;
      const uint64_t quantsFrom = toTiled ? gguf + 2 : at.quants;
      std::memcpy(out.data() + scale, in.data() + scaleFrom, 2);
      std::memcpy(out.data() + quants, in.data() + quantsFrom, kQuantBytes);
    }
  return out;
}

} // namespace

bool canTileQ4_0(int64_t nRows, int64_t nCols) {
  return nRows > 0 && nCols > 0 && nRows % kTileRows == 0 && nCols % 32 == 0;
}

absl::StatusOr<std::vector<uint8_t>> tileQ4_0(absl::Span<const uint8_t> gguf, int64_t nRows,
                                              int64_t nCols) {
  return relayout("tileQ4_0", gguf, nRows, nCols, /*toTiled=*/true);
}

absl::StatusOr<std::vector<uint8_t>> untileQ4_0(absl::Span<const uint8_t> tiled, int64_t nRows,
                                                int64_t nCols) {
  return relayout("untileQ4_0", tiled, nRows, nCols, /*toTiled=*/false);
}

} // namespace sinter::codegen
