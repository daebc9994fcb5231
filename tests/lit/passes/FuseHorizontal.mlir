// FuseHorizontal.mlir - tests passes/FuseHorizontal.cpp.
// RUN: sinter-opt %s -split-input-file --fuse-horizontal | FileCheck %s

// Gate and up read the same vector: one kernel.
// CHECK-LABEL: func.func @gate_up
func.func @gate_up(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1152> {sinter.slot = 1 : i64}, %a: !sinter.buffer<64> {sinter.slot = 2 : i64}, %b: !sinter.buffer<64> {sinter.slot = 3 : i64}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}, !sinter.buffer<64> {sinter.slot = 3 : i64}) {
  %c16 = arith.constant 16 : i64
  %c64 = arith.constant 64 : i64
  // CHECK: %[[K:.+]]:2 = sinter.kernel "qmatmulx2" patterns ["horizontal"]
  // CHECK: return %[[K]]#0, %[[K]]#1
  %a1 = sinter.qmatmul %w, %x into %a [n_rows = %c16, n_cols = %c64, dtype = "Q8_0"] : !sinter.buffer<1152>, !sinter.buffer<256>, !sinter.buffer<64>
  %b1 = sinter.qmatmul %w, %x into %b [n_rows = %c16, n_cols = %c64, dtype = "Q8_0"] : !sinter.buffer<1152>, !sinter.buffer<256>, !sinter.buffer<64>
  return %a1, %b1 : !sinter.buffer<64>, !sinter.buffer<64>
}

// -----

// The second contraction reads the first one's result: not siblings.
// CHECK-LABEL: func.func @no_fuse_chained
func.func @no_fuse_chained(%x: !sinter.buffer<64> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1088> {sinter.slot = 1 : i64}, %a: !sinter.buffer<64> {sinter.slot = 2 : i64}, %b: !sinter.buffer<64> {sinter.slot = 3 : i64}) -> (!sinter.buffer<64> {sinter.slot = 3 : i64}) {
  %c16 = arith.constant 16 : i64
  %c32 = arith.constant 32 : i64
  // CHECK-NOT: sinter.kernel
  %a1 = sinter.qmatmul %w, %x into %a [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  %b1 = sinter.qmatmul %w, %a1 into %b [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  return %b1 : !sinter.buffer<64>
}
