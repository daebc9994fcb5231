// FuseResidualAdd.mlir - tests passes/FuseResidualAdd.cpp.
// RUN: sinter-opt %s -split-input-file --fuse-residual-add | FileCheck %s

// The output projection, the residual add into x, and the copy of x: one kernel.
// CHECK-LABEL: func.func @projection_add_copy
func.func @projection_add_copy(%a: !sinter.buffer<64> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1088> {sinter.slot = 1 : i64}, %t: !sinter.buffer<64> {sinter.slot = 2 : i64}, %x: !sinter.buffer<64> {sinter.slot = 3 : i64}, %res: !sinter.buffer<64> {sinter.slot = 4 : i64}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}, !sinter.buffer<64> {sinter.slot = 3 : i64}, !sinter.buffer<64> {sinter.slot = 4 : i64}) {
  %c16 = arith.constant 16 : i64
  %c64 = arith.constant 64 : i64
  // CHECK: sinter.kernel "qmatmul+add+copy_buffer" patterns ["residual-add"]
  %t1 = sinter.qmatmul %w, %a into %t [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  %x1 = sinter.add %t1, %x into %x [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  %r1 = sinter.copy_buffer %x1 into %res [size = %c64] : !sinter.buffer<64>, !sinter.buffer<64>
  return %t1, %x1, %r1 : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
}

// -----

// An add of two arguments after a contraction: nothing to fuse.
// CHECK-LABEL: func.func @no_fuse_unrelated_add
func.func @no_fuse_unrelated_add(%a: !sinter.buffer<64> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1088> {sinter.slot = 1 : i64}, %t: !sinter.buffer<64> {sinter.slot = 2 : i64}, %x: !sinter.buffer<64> {sinter.slot = 3 : i64}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}, !sinter.buffer<64> {sinter.slot = 3 : i64}) {
  %c16 = arith.constant 16 : i64
  // CHECK-NOT: sinter.kernel
  %t1 = sinter.qmatmul %w, %a into %t [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  %x1 = sinter.add %a, %x into %x [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  return %t1, %x1 : !sinter.buffer<64>, !sinter.buffer<64>
}
