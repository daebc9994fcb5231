// FuseElementwise.mlir - tests passes/FuseElementwise.cpp.
// RUN: sinter-opt %s -split-input-file --fuse-elementwise | FileCheck %s

// silu, then a product with its result, then a sum: one element-wise kernel.
// CHECK-LABEL: func.func @chain
func.func @chain(%a: !sinter.buffer<64> {sinter.slot = 0 : i64}, %b: !sinter.buffer<64> {sinter.slot = 1 : i64}, %o: !sinter.buffer<64> {sinter.slot = 2 : i64}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}) {
  %c16 = arith.constant 16 : i64
  // CHECK: sinter.kernel "silu+element_mul+add" patterns ["elementwise"]
  %o1 = sinter.silu %a into %o [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>
  %o2 = sinter.element_mul %o1, %b into %o1 [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  %o3 = sinter.add %o2, %a into %o2 [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  return %o3 : !sinter.buffer<64>
}

// -----

// Two element-wise ops that do not read each other stay apart.
// CHECK-LABEL: func.func @no_fuse_independent
func.func @no_fuse_independent(%a: !sinter.buffer<64> {sinter.slot = 0 : i64}, %b: !sinter.buffer<64> {sinter.slot = 1 : i64}) -> (!sinter.buffer<64> {sinter.slot = 0 : i64}, !sinter.buffer<64> {sinter.slot = 1 : i64}) {
  %c16 = arith.constant 16 : i64
  // CHECK-NOT: sinter.kernel
  %a1 = sinter.silu %a into %a [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>
  %b1 = sinter.silu %b into %b [size = %c16] : !sinter.buffer<64>, !sinter.buffer<64>
  return %a1, %b1 : !sinter.buffer<64>, !sinter.buffer<64>
}
