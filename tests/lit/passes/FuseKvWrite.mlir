// FuseKvWrite.mlir - tests passes/FuseKvWrite.cpp.
// RUN: sinter-opt %s -split-input-file --fuse-kv-write | FileCheck %s

// The K projection's result is copied into the cache at a parameter offset: the copy joins.
// CHECK-LABEL: func.func @k_into_cache
func.func @k_into_cache(%x: !sinter.buffer<64> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1088> {sinter.slot = 1 : i64}, %k: !sinter.buffer<64> {sinter.slot = 2 : i64}, %kc: !sinter.buffer<640> {sinter.slot = 3 : i64}, %off: i64 {sinter.param = array<i64: 1, 1>}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}, !sinter.buffer<640> {sinter.slot = 3 : i64}) {
  %c0 = arith.constant 0 : i64
  %c16 = arith.constant 16 : i64
  %c64 = arith.constant 64 : i64
  // CHECK: sinter.kernel "qmatmul+copy_buffer_offset" patterns ["kv-write"]
  // CHECK: sinter.yield
  // CHECK-NOT: sinter.copy_buffer_offset
  // CHECK: return
  %k1 = sinter.qmatmul %w, %x into %k [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  %kc1 = sinter.copy_buffer_offset %k1 into %kc [src_offset = %c0, dst_offset = %off, size = %c64] : !sinter.buffer<64>, !sinter.buffer<640>
  return %k1, %kc1 : !sinter.buffer<64>, !sinter.buffer<640>
}

// -----

// The copied version was not produced by the kernel before (it is an argument).
// CHECK-LABEL: func.func @no_fuse_other_source
func.func @no_fuse_other_source(%x: !sinter.buffer<64> {sinter.slot = 0 : i64}, %w: !sinter.buffer<1088> {sinter.slot = 1 : i64}, %k: !sinter.buffer<64> {sinter.slot = 2 : i64}, %kc: !sinter.buffer<640> {sinter.slot = 3 : i64}) -> (!sinter.buffer<64> {sinter.slot = 2 : i64}, !sinter.buffer<640> {sinter.slot = 3 : i64}) {
  %c0 = arith.constant 0 : i64
  %c16 = arith.constant 16 : i64
  %c64 = arith.constant 64 : i64
  // CHECK-NOT: sinter.kernel
  %k1 = sinter.qmatmul %w, %x into %k [n_rows = %c16, n_cols = %c16, dtype = "F32"] : !sinter.buffer<1088>, !sinter.buffer<64>, !sinter.buffer<64>
  %kc1 = sinter.copy_buffer_offset %x into %kc [src_offset = %c0, dst_offset = %c0, size = %c64] : !sinter.buffer<64>, !sinter.buffer<640>
  return %k1, %kc1 : !sinter.buffer<64>, !sinter.buffer<640>
}
