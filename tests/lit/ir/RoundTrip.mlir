// RoundTrip.mlir - every sinter op parses, verifies and prints back in the same form.
// RUN: sinter-opt %s -split-input-file | sinter-opt -split-input-file | FileCheck %s
// The generic form carries the same information.
// RUN: sinter-opt %s -split-input-file -mlir-print-op-generic | sinter-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.+]]: !sinter.buffer<96>, %[[B:.+]]: !sinter.buffer<48>, %[[O:.+]]: !sinter.buffer<64>)
func.func @matmul(%a: !sinter.buffer<96>, %b: !sinter.buffer<48>, %out: !sinter.buffer<64>) -> !sinter.buffer<64> {
  // CHECK-DAG: %[[M:.+]] = arith.constant 4 : i64
  // CHECK-DAG: %[[N:.+]] = arith.constant 2 : i64
  // CHECK-DAG: %[[K:.+]] = arith.constant 6 : i64
  %m = arith.constant 4 : i64
  %n = arith.constant 2 : i64
  %k = arith.constant 6 : i64
  // CHECK: %[[R:.+]] = sinter.matmul %[[A]], %[[B]] into %[[O]] [m = %[[M]], n = %[[N]], k = %[[K]]] : !sinter.buffer<96>, !sinter.buffer<48>, !sinter.buffer<64>
  %r = sinter.matmul %a, %b into %out [m = %m, n = %n, k = %k] : !sinter.buffer<96>, !sinter.buffer<48>, !sinter.buffer<64>
  // CHECK: return %[[R]]
  return %r : !sinter.buffer<64>
}

// -----

// CHECK-LABEL: func.func @qmatmul
// CHECK-SAME: (%[[W:.+]]: !sinter.buffer<576>, %[[X:.+]]: !sinter.buffer<256>, %[[O:.+]]: !sinter.buffer<64>)
func.func @qmatmul(%w: !sinter.buffer<576>, %x: !sinter.buffer<256>, %out: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %rows = arith.constant 16 : i64
  %cols = arith.constant 64 : i64
  // CHECK: %[[R:.+]] = sinter.qmatmul %[[W]], %[[X]] into %[[O]] [n_rows = %{{.+}}, n_cols = %{{.+}}, dtype = "Q4_0"] : !sinter.buffer<576>, !sinter.buffer<256>, !sinter.buffer<64>
  %r = sinter.qmatmul %w, %x into %out [n_rows = %rows, n_cols = %cols, dtype = "Q4_0"] : !sinter.buffer<576>, !sinter.buffer<256>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

// The dtype may also be written as its GGUF id or in lower case; it prints as the name.
// CHECK-LABEL: func.func @qmatmul_dtype_spellings
func.func @qmatmul_dtype_spellings(%w: !sinter.buffer<8448>, %x: !sinter.buffer<1024>, %out: !sinter.buffer<32>) -> (!sinter.buffer<32>, !sinter.buffer<32>) {
  %rows = arith.constant 8 : i64
  %cols = arith.constant 256 : i64
  // CHECK: dtype = "Q4_K"
  %r0 = sinter.qmatmul %w, %x into %out [n_rows = %rows, n_cols = %cols, dtype = 12] : !sinter.buffer<8448>, !sinter.buffer<1024>, !sinter.buffer<32>
  // CHECK: dtype = "Q6_K"
  %r1 = sinter.qmatmul %w, %x into %out [n_rows = %rows, n_cols = %cols, dtype = "q6_k"] : !sinter.buffer<8448>, !sinter.buffer<1024>, !sinter.buffer<32>
  return %r0, %r1 : !sinter.buffer<32>, !sinter.buffer<32>
}

// -----

// CHECK-LABEL: func.func @attention
// CHECK-SAME: (%[[Q:.+]]: !sinter.buffer<512>, %[[KC:.+]]: !sinter.buffer<8192>, %[[S:.+]]: !sinter.buffer<64>, %[[VC:.+]]: !sinter.buffer<8192>, %[[O:.+]]: !sinter.buffer<512>, %[[LEN:.+]]: i64)
func.func @attention(%q: !sinter.buffer<512>, %kc: !sinter.buffer<8192>, %s: !sinter.buffer<64>,
                     %vc: !sinter.buffer<8192>, %o: !sinter.buffer<512>, %len: i64) -> !sinter.buffer<512> {
  %hd = arith.constant 32 : i64
  %zero = arith.constant 0 : i64
  %stride = arith.constant 128 : i64
  // CHECK: %[[SC:.+]] = sinter.attn_score %[[Q]], %[[KC]] into %[[S]] [head_dim = %{{.+}}, seq_len = %[[LEN]], head_offset = %{{.+}}, kv_offset = %{{.+}}, kv_stride = %{{.+}}] : !sinter.buffer<512>, !sinter.buffer<8192>, !sinter.buffer<64>
  %sc = sinter.attn_score %q, %kc into %s [head_dim = %hd, seq_len = %len, head_offset = %zero, kv_offset = %zero, kv_stride = %stride] : !sinter.buffer<512>, !sinter.buffer<8192>, !sinter.buffer<64>
  // CHECK: %[[SM:.+]] = sinter.softmax %[[SC]] into %[[SC]] [size = %[[LEN]]] : !sinter.buffer<64>, !sinter.buffer<64>
  %sm = sinter.softmax %sc into %sc [size = %len] : !sinter.buffer<64>, !sinter.buffer<64>
  // CHECK: %[[AV:.+]] = sinter.attn_value %[[SM]], %[[VC]] into %[[O]] [head_dim = %{{.+}}, seq_len = %[[LEN]], kv_offset = %{{.+}}, kv_stride = %{{.+}}, out_offset = %{{.+}}] : !sinter.buffer<64>, !sinter.buffer<8192>, !sinter.buffer<512>
  %av = sinter.attn_value %sm, %vc into %o [head_dim = %hd, seq_len = %len, kv_offset = %zero, kv_stride = %stride, out_offset = %zero] : !sinter.buffer<64>, !sinter.buffer<8192>, !sinter.buffer<512>
  return %av : !sinter.buffer<512>
}

// -----

// CHECK-LABEL: func.func @norm_and_rope
// CHECK-SAME: (%[[X:.+]]: !sinter.buffer<256>, %[[W:.+]]: !sinter.buffer<256>, %[[Q:.+]]: !sinter.buffer<256>, %[[K:.+]]: !sinter.buffer<128>, %[[POS:.+]]: i64)
func.func @norm_and_rope(%x: !sinter.buffer<256>, %w: !sinter.buffer<256>, %q: !sinter.buffer<256>,
                         %k: !sinter.buffer<128>, %pos: i64) -> (!sinter.buffer<256>, !sinter.buffer<128>) {
  %size = arith.constant 64 : i64
  %hd = arith.constant 16 : i64
  %nq = arith.constant 4 : i64
  %nk = arith.constant 2 : i64
  // CHECK: %[[N:.+]] = sinter.rms_norm %[[X]], %[[W]] into %[[Q]] [size = %{{.+}}, eps = 9.99999974E-6] : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
  %n = sinter.rms_norm %x, %w into %q [size = %size, eps = 1.0e-5] : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
  // CHECK: %[[RQ:.+]], %[[RK:.+]] = sinter.rope %[[N]], %[[K]] [pos = %[[POS]], head_dim = %{{.+}}, n_heads_q = %{{.+}}, n_heads_k = %{{.+}}, freq_base = 1.000000e+04] : !sinter.buffer<256>, !sinter.buffer<128>
  %rq, %rk = sinter.rope %n, %k [pos = %pos, head_dim = %hd, n_heads_q = %nq, n_heads_k = %nk, freq_base = 10000.0] : !sinter.buffer<256>, !sinter.buffer<128>
  // CHECK: return %[[RQ]], %[[RK]]
  return %rq, %rk : !sinter.buffer<256>, !sinter.buffer<128>
}

// -----

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: (%[[A:.+]]: !sinter.buffer<64>, %[[B:.+]]: !sinter.buffer<64>, %[[O:.+]]: !sinter.buffer<64>)
func.func @elementwise(%a: !sinter.buffer<64>, %b: !sinter.buffer<64>, %o: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %size = arith.constant 16 : i64
  // CHECK: %[[S:.+]] = sinter.silu %[[A]] into %[[O]] [size = %[[SIZE:.+]]] : !sinter.buffer<64>, !sinter.buffer<64>
  %s = sinter.silu %a into %o [size = %size] : !sinter.buffer<64>, !sinter.buffer<64>
  // CHECK: %[[M:.+]] = sinter.element_mul %[[S]], %[[B]] into %[[S]] [size = %[[SIZE]]] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  %m = sinter.element_mul %s, %b into %s [size = %size] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  // CHECK: %[[R:.+]] = sinter.add %[[M]], %[[A]] into %[[M]] [size = %[[SIZE]]] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  %r = sinter.add %m, %a into %m [size = %size] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[S:.+]]: !sinter.buffer<64>, %[[C:.+]]: !sinter.buffer<1024>, %[[OFF:.+]]: i64)
func.func @data_movement(%src: !sinter.buffer<64>, %cache: !sinter.buffer<1024>, %off: i64)
    -> (!sinter.buffer<1024>, !sinter.buffer<64>) {
  %zero = arith.constant 0 : i64
  %size = arith.constant 64 : i64
  // CHECK: %[[U:.+]] = sinter.upload payload 3 into %[[S]] [size = %{{.+}}] : !sinter.buffer<64>
  %u = sinter.upload payload 3 into %src [size = %size] : !sinter.buffer<64>
  // CHECK: %[[C1:.+]] = sinter.copy_buffer %[[U]] into %[[C]] [size = %{{.+}}] : !sinter.buffer<64>, !sinter.buffer<1024>
  %c1 = sinter.copy_buffer %u into %cache [size = %size] : !sinter.buffer<64>, !sinter.buffer<1024>
  // CHECK: %[[C2:.+]] = sinter.copy_buffer_offset %[[U]] into %[[C1]] [src_offset = %{{.+}}, dst_offset = %[[OFF]], size = %{{.+}}] : !sinter.buffer<64>, !sinter.buffer<1024>
  %c2 = sinter.copy_buffer_offset %u into %c1 [src_offset = %zero, dst_offset = %off, size = %size] : !sinter.buffer<64>, !sinter.buffer<1024>
  // CHECK: %[[E:.+]] = sinter.extract %[[C2]][%[[OFF]]] : !sinter.buffer<1024> -> !sinter.buffer<64>
  %e = sinter.extract %c2[%off] : !sinter.buffer<1024> -> !sinter.buffer<64>
  // CHECK: %[[I:.+]] = sinter.insert %[[E]] into %[[C2]][%{{.+}}] : !sinter.buffer<64> into !sinter.buffer<1024>
  %i = sinter.insert %e into %c2[%zero] : !sinter.buffer<64> into !sinter.buffer<1024>
  // CHECK: return %[[I]], %[[E]]
  return %i, %e : !sinter.buffer<1024>, !sinter.buffer<64>
}

// -----

// CHECK-LABEL: func.func @kernel
// CHECK-SAME: (%[[X:.+]]: !sinter.buffer<256>, %[[O:.+]]: !sinter.buffer<256>)
func.func @kernel(%x: !sinter.buffer<256>, %o: !sinter.buffer<256>) -> !sinter.buffer<256> {
  %n = arith.constant 64 : i64
  // CHECK: %[[K:.+]] = sinter.kernel "silu_0" patterns [] (%[[BX:.+]] = %[[X]], %[[BO:.+]] = %[[O]], %[[BN:.+]] = %{{.+}}) : (!sinter.buffer<256>, !sinter.buffer<256>, i64) -> (!sinter.buffer<256>) {
  %k = sinter.kernel "silu_0" patterns [] (%bx = %x, %bo = %o, %bn = %n)
      : (!sinter.buffer<256>, !sinter.buffer<256>, i64) -> (!sinter.buffer<256>) {
    // CHECK-NEXT: %[[S:.+]] = sinter.silu %[[BX]] into %[[BO]] [size = %[[BN]]]
    %s = sinter.silu %bx into %bo [size = %bn] : !sinter.buffer<256>, !sinter.buffer<256>
    // CHECK-NEXT: sinter.yield %[[S]] : !sinter.buffer<256>
    sinter.yield %s : !sinter.buffer<256>
  }
  // CHECK: return %[[K]]
  return %k : !sinter.buffer<256>
}
