// EliminateDeadVersions.mlir - tests passes/EliminateDeadVersions.cpp.
// RUN: sinter-opt %s -split-input-file --eliminate-dead-versions | FileCheck %s

// A copy whose version is only overwritten whole later is never materialized.
// CHECK-LABEL: func.func @overwritten_copy
func.func @overwritten_copy(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %res: !sinter.buffer<256> {sinter.slot = 1 : i64}) -> (!sinter.buffer<256> {sinter.slot = 1 : i64}) {
  %b = arith.constant 256 : i64
  %n = arith.constant 64 : i64
  // CHECK-NOT: sinter.copy_buffer
  %r1 = sinter.copy_buffer %x into %res [size = %b] : !sinter.buffer<256>, !sinter.buffer<256>
  // CHECK: sinter.silu %{{.*}} into %arg1
  %r2 = sinter.silu %x into %r1 [size = %n] : !sinter.buffer<256>, !sinter.buffer<256>
  return %r2 : !sinter.buffer<256>
}

// -----

// A version the host can observe (a function result) stays.
// CHECK-LABEL: func.func @no_fuse_observable
func.func @no_fuse_observable(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %res: !sinter.buffer<256> {sinter.slot = 1 : i64}) -> (!sinter.buffer<256> {sinter.slot = 1 : i64}) {
  %b = arith.constant 256 : i64
  // CHECK: sinter.copy_buffer
  %r1 = sinter.copy_buffer %x into %res [size = %b] : !sinter.buffer<256>, !sinter.buffer<256>
  return %r1 : !sinter.buffer<256>
}

// -----

// A partial overwrite reads the old version's other elements: the older write stays.
// CHECK-LABEL: func.func @no_fuse_partial_overwrite
func.func @no_fuse_partial_overwrite(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %o: !sinter.buffer<256> {sinter.slot = 1 : i64}) -> (!sinter.buffer<256> {sinter.slot = 1 : i64}) {
  %n = arith.constant 64 : i64
  %h = arith.constant 32 : i64
  // CHECK: sinter.silu
  %o1 = sinter.silu %x into %o [size = %n] : !sinter.buffer<256>, !sinter.buffer<256>
  // CHECK: sinter.add
  %o2 = sinter.add %x, %x into %o1 [size = %h] : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
  return %o2 : !sinter.buffer<256>
}
