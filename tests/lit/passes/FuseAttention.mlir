// FuseAttention.mlir - tests passes/FuseAttention.cpp.
// RUN: sinter-opt %s -split-input-file --fuse-attention | FileCheck %s

// Two heads of score -> softmax -> value become one attention kernel.
// CHECK-LABEL: func.func @two_heads
func.func @two_heads(%q: !sinter.buffer<64> {sinter.slot = 0 : i64}, %kc: !sinter.buffer<256> {sinter.slot = 1 : i64}, %vc: !sinter.buffer<256> {sinter.slot = 2 : i64}, %s: !sinter.buffer<16> {sinter.slot = 3 : i64}, %o: !sinter.buffer<64> {sinter.slot = 4 : i64}, %len: i64 {sinter.param = array<i64: 0, 1>}) -> (!sinter.buffer<16> {sinter.slot = 3 : i64}, !sinter.buffer<64> {sinter.slot = 4 : i64}) {
  %c0 = arith.constant 0 : i64
  %c8 = arith.constant 8 : i64
  %c16 = arith.constant 16 : i64
  // CHECK: %[[K:.+]]:2 = sinter.kernel "(attn_score+softmax+attn_value)x2" patterns ["attention"]
  // CHECK-COUNT-2: sinter.attn_score
  // CHECK: sinter.yield
  // CHECK-NOT: sinter.attn_score
  // CHECK: return %[[K]]#0, %[[K]]#1
  %s1 = sinter.attn_score %q, %kc into %s [head_dim = %c8, seq_len = %len, head_offset = %c0, kv_offset = %c0, kv_stride = %c16] : !sinter.buffer<64>, !sinter.buffer<256>, !sinter.buffer<16>
  %s2 = sinter.softmax %s1 into %s1 [size = %len] : !sinter.buffer<16>, !sinter.buffer<16>
  %o1 = sinter.attn_value %s2, %vc into %o [head_dim = %c8, seq_len = %len, kv_offset = %c0, kv_stride = %c16, out_offset = %c0] : !sinter.buffer<16>, !sinter.buffer<256>, !sinter.buffer<64>
  %s3 = sinter.attn_score %q, %kc into %s2 [head_dim = %c8, seq_len = %len, head_offset = %c8, kv_offset = %c8, kv_stride = %c16] : !sinter.buffer<64>, !sinter.buffer<256>, !sinter.buffer<16>
  %s4 = sinter.softmax %s3 into %s3 [size = %len] : !sinter.buffer<16>, !sinter.buffer<16>
  %o2 = sinter.attn_value %s4, %vc into %o1 [head_dim = %c8, seq_len = %len, kv_offset = %c8, kv_stride = %c16, out_offset = %c8] : !sinter.buffer<16>, !sinter.buffer<256>, !sinter.buffer<64>
  return %s4, %o2 : !sinter.buffer<16>, !sinter.buffer<64>
}

// -----

// A softmax of something else between score and value breaks the pattern.
// CHECK-LABEL: func.func @no_fuse_other_softmax
func.func @no_fuse_other_softmax(%q: !sinter.buffer<64> {sinter.slot = 0 : i64}, %kc: !sinter.buffer<256> {sinter.slot = 1 : i64}, %s: !sinter.buffer<16> {sinter.slot = 2 : i64}, %t: !sinter.buffer<16> {sinter.slot = 3 : i64}) -> (!sinter.buffer<16> {sinter.slot = 2 : i64}, !sinter.buffer<16> {sinter.slot = 3 : i64}) {
  %c0 = arith.constant 0 : i64
  %c4 = arith.constant 4 : i64
  %c8 = arith.constant 8 : i64
  %c16 = arith.constant 16 : i64
  // CHECK-NOT: sinter.kernel
  %s1 = sinter.attn_score %q, %kc into %s [head_dim = %c8, seq_len = %c4, head_offset = %c0, kv_offset = %c0, kv_stride = %c16] : !sinter.buffer<64>, !sinter.buffer<256>, !sinter.buffer<16>
  %t1 = sinter.softmax %t into %t [size = %c4] : !sinter.buffer<16>, !sinter.buffer<16>
  return %s1, %t1 : !sinter.buffer<16>, !sinter.buffer<16>
}
