// FuseRopeEpilogue.mlir - tests passes/FuseRopeEpilogue.cpp.
// RUN: sinter-opt %s -split-input-file --fuse-horizontal --fuse-rope-epilogue | FileCheck %s

// Q and K projections, then rope on both: rope joins the projections' kernel.
// CHECK-LABEL: func.func @qk_rope
func.func @qk_rope(%x: !sinter.buffer<64> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1024> {sinter.slot = 1 : i64}, %q: !sinter.buffer<64> {sinter.slot = 2 : i64}, %k: !sinter.buffer<64> {sinter.slot = 3 : i64}, %pos: i64 {sinter.param = array<i64: 2, 0>}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}, !sinter.buffer<64> {sinter.slot = 3 : i64}) {
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i64
  %c8 = arith.constant 8 : i64
  %c16 = arith.constant 16 : i64
  // CHECK: sinter.kernel "matmulx2+rope" patterns ["horizontal", "rope-epilogue"]
  // CHECK: sinter.rope
  // CHECK: sinter.yield
  // CHECK-NOT: sinter.rope
  // CHECK: return
  %q1 = sinter.matmul %x, %w into %q [m = %c1, n = %c16, k = %c16] : !sinter.buffer<64>, !sinter.buffer<1024>, !sinter.buffer<64>
  %k1 = sinter.matmul %x, %w into %k [m = %c1, n = %c16, k = %c16] : !sinter.buffer<64>, !sinter.buffer<1024>, !sinter.buffer<64>
  %q2, %k2 = sinter.rope %q1, %k1 [pos = %pos, head_dim = %c8, n_heads_q = %c2, n_heads_k = %c2, freq_base = 1.0e+04] : !sinter.buffer<64>, !sinter.buffer<64>
  return %q2, %k2 : !sinter.buffer<64>, !sinter.buffer<64>
}

// -----

// Rope on vectors no contraction before it produced.
// CHECK-LABEL: func.func @no_fuse_not_produced
func.func @no_fuse_not_produced(%q: !sinter.buffer<64> {sinter.slot = 0 : i64}, %k: !sinter.buffer<64> {sinter.slot = 1 : i64}) -> (!sinter.buffer<64> {sinter.slot = 0 : i64}, !sinter.buffer<64> {sinter.slot = 1 : i64}) {
  %c0 = arith.constant 0 : i64
  %c2 = arith.constant 2 : i64
  %c8 = arith.constant 8 : i64
  // CHECK-NOT: sinter.kernel
  %q2, %k2 = sinter.rope %q, %k [pos = %c0, head_dim = %c8, n_heads_q = %c2, n_heads_k = %c2, freq_base = 1.0e+04] : !sinter.buffer<64>, !sinter.buffer<64>
  return %q2, %k2 : !sinter.buffer<64>, !sinter.buffer<64>
}
