// FuseSwiglu.mlir - tests passes/FuseSwiglu.cpp.
// RUN: sinter-opt %s -split-input-file --fuse-horizontal --fuse-swiglu | FileCheck %s

// silu(gate) * up after the gate/up kernel joins it.
// CHECK-LABEL: func.func @swiglu
func.func @swiglu(%x: !sinter.buffer<64> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1088> {sinter.slot = 1 : i64}, %g: !sinter.buffer<64> {sinter.slot = 2 : i64}, %u: !sinter.buffer<64> {sinter.slot = 3 : i64}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}, !sinter.buffer<64> {sinter.slot = 3 : i64}) {
  %c16 = arith.constant 16 : i64
  // CHECK: sinter.kernel "qmatmulx2+silu+element_mul" patterns ["horizontal", "swiglu"]
  // CHECK: sinter.yield
  // CHECK-NOT: sinter.silu
  // CHECK: return
  %g1 = sinter.qmatmul %w, %x into %g [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  %u1 = sinter.qmatmul %w, %x into %u [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  %g2 = sinter.silu %g1 into %g1 [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>
  %g3 = sinter.element_mul %g2, %u1 into %g2 [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  return %g3, %u1 : !sinter.buffer<64>, !sinter.buffer<64>
}

// -----

// silu without the product: no swiglu.
// CHECK-LABEL: func.func @no_fuse_silu_alone
func.func @no_fuse_silu_alone(%x: !sinter.buffer<64> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1088> {sinter.slot = 1 : i64}, %g: !sinter.buffer<64> {sinter.slot = 2 : i64}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}) {
  %c16 = arith.constant 16 : i64
  // CHECK-NOT: sinter.kernel
  %g1 = sinter.qmatmul %w, %x into %g [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  %g2 = sinter.silu %g1 into %g1 [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>
  return %g2 : !sinter.buffer<64>
}
