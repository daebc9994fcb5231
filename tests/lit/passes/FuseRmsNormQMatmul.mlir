// FuseRmsNormQMatmul.mlir - tests passes/FuseRmsNormQMatmul.cpp.
// RUN: sinter-opt %s -split-input-file --fuse-rmsnorm-qmatmul | FileCheck %s
// RUN: sinter-opt %s -split-input-file '--fuse-rmsnorm-qmatmul=horizontal=false' | FileCheck %s --check-prefix=SINGLE

// The norm and the three projections that read it: one kernel.
// CHECK-LABEL: func.func @norm_qkv
// SINGLE-LABEL: func.func @norm_qkv
func.func @norm_qkv(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %g: !sinter.buffer<256> {sinter.slot = 1 : i64}, %xb: !sinter.buffer<256> {sinter.slot = 2 : i64}, %w: !sinter.buffer<1152> {sinter.slot = 3 : i64}, %q: !sinter.buffer<64> {sinter.slot = 4 : i64}, %k: !sinter.buffer<64> {sinter.slot = 5 : i64}, %v: !sinter.buffer<64> {sinter.slot = 6 : i64}) -> (!sinter.buffer<256> {sinter.slot = 2 : i64}, !sinter.buffer<64> {sinter.slot = 4 : i64}, !sinter.buffer<64> {sinter.slot = 5 : i64}, !sinter.buffer<64> {sinter.slot = 6 : i64}) {
  %c16 = arith.constant 16 : i64
  %c64 = arith.constant 64 : i64
  // CHECK: sinter.kernel "rms_norm+qmatmulx3" patterns ["rmsnorm-qmatmul", "horizontal"]
  // CHECK-NEXT: arith.constant
  // CHECK: sinter.rms_norm
  // CHECK-COUNT-3: sinter.qmatmul
  // CHECK: sinter.yield
  // SINGLE: sinter.kernel "rms_norm+qmatmul" patterns ["rmsnorm-qmatmul"]
  // SINGLE: sinter.yield
  // SINGLE-COUNT-2: sinter.qmatmul
  %n = sinter.rms_norm %x, %g into %xb [size = %c64, eps = 1.0e-05] : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
  %q1 = sinter.qmatmul %w, %n into %q [n_rows = %c16, n_cols = %c64, dtype = "Q8_0"] : !sinter.buffer<1152>, !sinter.buffer<256>, !sinter.buffer<64>
  %k1 = sinter.qmatmul %w, %n into %k [n_rows = %c16, n_cols = %c64, dtype = "Q8_0"] : !sinter.buffer<1152>, !sinter.buffer<256>, !sinter.buffer<64>
  %v1 = sinter.qmatmul %w, %n into %v [n_rows = %c16, n_cols = %c64, dtype = "Q8_0"] : !sinter.buffer<1152>, !sinter.buffer<256>, !sinter.buffer<64>
  return %n, %q1, %k1, %v1 : !sinter.buffer<256>, !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
}

// -----

// The contraction reads another vector than the norm's result.
// CHECK-LABEL: func.func @no_fuse_other_input
func.func @no_fuse_other_input(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %g: !sinter.buffer<256> {sinter.slot = 1 : i64}, %xb: !sinter.buffer<256> {sinter.slot = 2 : i64}, %w: !sinter.buffer<1152> {sinter.slot = 3 : i64}, %q: !sinter.buffer<64> {sinter.slot = 4 : i64}) -> (!sinter.buffer<256> {sinter.slot = 2 : i64}, !sinter.buffer<64> {sinter.slot = 4 : i64}) {
  %c16 = arith.constant 16 : i64
  %c64 = arith.constant 64 : i64
  // CHECK-NOT: sinter.kernel
  %n = sinter.rms_norm %x, %g into %xb [size = %c64, eps = 1.0e-05] : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
  %q1 = sinter.qmatmul %w, %x into %q [n_rows = %c16, n_cols = %c64, dtype = "Q8_0"] : !sinter.buffer<1152>, !sinter.buffer<256>, !sinter.buffer<64>
  return %n, %q1 : !sinter.buffer<256>, !sinter.buffer<64>
}
