// ForwardCopies.mlir - tests passes/ForwardCopies.cpp.
// RUN: sinter-opt %s -split-input-file --forward-copies | FileCheck %s

// The residual pattern: the add reads the copy's source and writes it in place.
// CHECK-LABEL: func.func @residual
func.func @residual(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %res: !sinter.buffer<256> {sinter.slot = 1 : i64}, %y: !sinter.buffer<256> {sinter.slot = 2 : i64}) -> (!sinter.buffer<256> {sinter.slot = 0 : i64}) {
  %b = arith.constant 256 : i64
  %n = arith.constant 64 : i64
  %r1 = sinter.copy_buffer %x into %res [size = %b] : !sinter.buffer<256>, !sinter.buffer<256>
  // CHECK: sinter.add %{{.*}}, %[[X:arg0]] into %[[X]]
  %x1 = sinter.add %y, %r1 into %x [size = %n] : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
  return %x1 : !sinter.buffer<256>
}

// -----

// The source is overwritten between the copy and the read: the read keeps the copy.
// CHECK-LABEL: func.func @no_fuse_source_overwritten
func.func @no_fuse_source_overwritten(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %res: !sinter.buffer<256> {sinter.slot = 1 : i64}, %y: !sinter.buffer<256> {sinter.slot = 2 : i64}) -> (!sinter.buffer<256> {sinter.slot = 2 : i64}) {
  %b = arith.constant 256 : i64
  %n = arith.constant 64 : i64
  // CHECK: %[[R:.+]] = sinter.copy_buffer
  %r1 = sinter.copy_buffer %x into %res [size = %b] : !sinter.buffer<256>, !sinter.buffer<256>
  %x1 = sinter.silu %y into %x [size = %n] : !sinter.buffer<256>, !sinter.buffer<256>
  // CHECK: sinter.add %{{.*}}, %[[R]] into
  %y1 = sinter.add %x1, %r1 into %y [size = %n] : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
  return %y1 : !sinter.buffer<256>
}

// -----

// A partial copy is not forwarded.
// CHECK-LABEL: func.func @no_fuse_partial_copy
func.func @no_fuse_partial_copy(%x: !sinter.buffer<256> {sinter.slot = 0 : i64}, %res: !sinter.buffer<256> {sinter.slot = 1 : i64}, %y: !sinter.buffer<256> {sinter.slot = 2 : i64}) -> (!sinter.buffer<256> {sinter.slot = 2 : i64}) {
  %b = arith.constant 128 : i64
  %n = arith.constant 32 : i64
  // CHECK: %[[R:.+]] = sinter.copy_buffer
  %r1 = sinter.copy_buffer %x into %res [size = %b] : !sinter.buffer<256>, !sinter.buffer<256>
  // CHECK: sinter.add %[[R]]
  %y1 = sinter.add %r1, %r1 into %y [size = %n] : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
  return %y1 : !sinter.buffer<256>
}
