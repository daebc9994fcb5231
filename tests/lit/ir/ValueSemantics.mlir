// ValueSemantics.mlir - sinter ops are pure functions of their operands (buffers are versions),
// so MLIR's generic cleanups apply: a version nobody reads is dead, two equal ops are one.
// RUN: sinter-opt %s -split-input-file -canonicalize -cse | FileCheck %s

// The silu writes a temporary that nobody reads afterwards (a freed buffer): it disappears. (A
// version that is only the "old" operand of a later full overwrite is still read as far as MLIR
// knows; removing those is a sinter pass's job.)
// CHECK-LABEL: func.func @dead_version
func.func @dead_version(%x: !sinter.buffer<64>, %tmp: !sinter.buffer<64>, %o: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %n = arith.constant 16 : i64
  // CHECK-NOT: sinter.silu
  %dead = sinter.silu %x into %tmp [size = %n] : !sinter.buffer<64>, !sinter.buffer<64>
  // CHECK: %[[R:.+]] = sinter.add
  %r = sinter.add %x, %x into %o [size = %n] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  // CHECK: return %[[R]]
  return %r : !sinter.buffer<64>
}

// -----

// Writing the same result into the same old version twice gives the same new version.
// CHECK-LABEL: func.func @equal_ops_merge
func.func @equal_ops_merge(%x: !sinter.buffer<64>, %o: !sinter.buffer<64>) -> (!sinter.buffer<64>, !sinter.buffer<64>) {
  %n = arith.constant 16 : i64
  // CHECK: %[[S:.+]] = sinter.silu
  // CHECK-NOT: sinter.silu
  %a = sinter.silu %x into %o [size = %n] : !sinter.buffer<64>, !sinter.buffer<64>
  %b = sinter.silu %x into %o [size = %n] : !sinter.buffer<64>, !sinter.buffer<64>
  // CHECK: return %[[S]], %[[S]]
  return %a, %b : !sinter.buffer<64>, !sinter.buffer<64>
}
