// TiledWeights.h - the tiled layout of Q4_0 weights that the Vulkan tiled quantized_matmul
// schedule reads (KernelSpec::tiledWeights; codegen/spirv/README.md, "Tiled weights").
//
// GGUF keeps a row's blocks back to back, 18 bytes each (a 2-byte f16 scale d, then 16 bytes of
// quants), so a block's quants start at byte 2 of a word half the time, and a GPU lane that takes
// whole blocks loads 5 unaligned words and shifts them. The tiled layout holds the same bytes
// moved: rows in tiles of kTileRows, and within a tile, block column c of its 32 rows side by
// side, 16 bytes of quants each, then (after every tile's quants) their scales the same way:
//
//   quants of (row r, block c): bytes [16 q, 16 q + 16), q = ((r / 32) * nBlocks + c) * 32 + r % 32
//   scale  of (row r, block c): bytes [Q + 2 q, Q + 2 q + 2),  Q = 16 * nRows * nBlocks
//
// The 16 quant bytes are GGUF's, in order (weight j in the low nibble of byte j, weight 16 + j in
// its high nibble); the size is GGUF's, n_rows x nBlocks x 18 bytes. So 32 lanes on the 32 rows of
// a tile load one block column as 512 consecutive bytes, 16-byte aligned, and 64 of scales.
// Only Q4_0 matrices whose n_rows is a multiple of kTileRows are tiled.
#ifndef SINTER_CODEGEN_TILEDWEIGHTS_H
#define SINTER_CODEGEN_TILEDWEIGHTS_H

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sinter::codegen {

inline constexpr int64_t kTileRows = 32;

/// True when a Q4_0 matrix of n_rows x n_cols has a tiled layout (n_rows a positive multiple of
/// kTileRows, n_cols a positive multiple of 32).
bool canTileQ4_0(int64_t nRows, int64_t nCols);

/// GGUF Q4_0 bytes of n_rows x n_cols (at least n_rows x n_cols / 32 x 18 of them) in the tiled
/// layout; InvalidArgument when the shape has none or the bytes are too few.
absl::StatusOr<std::vector<uint8_t>> tileQ4_0(absl::Span<const uint8_t> gguf, int64_t nRows,
                                              int64_t nCols);
/// The inverse: tiled bytes back to GGUF's layout.
absl::StatusOr<std::vector<uint8_t>> untileQ4_0(absl::Span<const uint8_t> tiled, int64_t nRows,
                                                int64_t nCols);

} // namespace sinter::codegen

#endif // SINTER_CODEGEN_TILEDWEIGHTS_H
