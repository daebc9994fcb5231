// Invalid.mlir - one case per verifier (and dtype parser) error of the sinter ops.
// RUN: sinter-opt %s -split-input-file -verify-diagnostics

func.func @rms_norm_weight_too_small(%x: !sinter.buffer<8192>, %w: !sinter.buffer<256>, %o: !sinter.buffer<8192>) -> !sinter.buffer<8192> {
  %n = arith.constant 2048 : i64
  // expected-error @+1 {{'sinter.rms_norm' op weight buffer holds 256 bytes, needs 8192}}
  %r = sinter.rms_norm %x, %w into %o [size = %n, eps = 1.0e-5] : !sinter.buffer<8192>, !sinter.buffer<256>, !sinter.buffer<8192>
  return %r : !sinter.buffer<8192>
}

// -----

func.func @rms_norm_zero_size(%x: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %n = arith.constant 0 : i64
  // expected-error @+1 {{'sinter.rms_norm' op size must be positive (the mean divides by it)}}
  %r = sinter.rms_norm %x, %x into %x [size = %n, eps = 1.0e-5] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @matmul_out_too_small(%a: !sinter.buffer<96>, %b: !sinter.buffer<48>, %out: !sinter.buffer<16>) -> !sinter.buffer<16> {
  %m = arith.constant 4 : i64
  %n = arith.constant 2 : i64
  %k = arith.constant 6 : i64
  // expected-error @+1 {{'sinter.matmul' op out buffer holds 16 bytes, needs 32}}
  %r = sinter.matmul %a, %b into %out [m = %m, n = %n, k = %k] : !sinter.buffer<96>, !sinter.buffer<48>, !sinter.buffer<16>
  return %r : !sinter.buffer<16>
}

// -----

func.func @matmul_in_place(%a: !sinter.buffer<64>, %b: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %four = arith.constant 4 : i64
  // expected-error-re @+1 {{'sinter.matmul' op out buffer {{[0-9]+}} bytes [0, 64) overlap a bytes [0, 64){{$}}}}
  %r = sinter.matmul %a, %b into %a [m = %four, n = %four, k = %four] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @negative_constant(%a: !sinter.buffer<64>, %o: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %n = arith.constant -1 : i64
  // expected-error @+1 {{'sinter.silu' op size is negative (-1)}}
  %r = sinter.silu %a into %o [size = %n] : !sinter.buffer<64>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @result_type_differs(%a: !sinter.buffer<64>, %o: !sinter.buffer<64>, %n: i64) -> !sinter.buffer<32> {
  // expected-error @+1 {{'sinter.silu' op failed to verify that all of {out, result} have same type}}
  %r = "sinter.silu"(%a, %o, %n) : (!sinter.buffer<64>, !sinter.buffer<64>, i64) -> !sinter.buffer<32>
  return %r : !sinter.buffer<32>
}

// -----

func.func @copy_offset_past_end(%s: !sinter.buffer<64>, %d: !sinter.buffer<1024>) -> !sinter.buffer<1024> {
  %zero = arith.constant 0 : i64
  %off = arith.constant 1000 : i64
  %size = arith.constant 64 : i64
  // expected-error @+1 {{'sinter.copy_buffer_offset' op dst buffer holds 1024 bytes, needs bytes [1000, 1064)}}
  %r = sinter.copy_buffer_offset %s into %d [src_offset = %zero, dst_offset = %off, size = %size] : !sinter.buffer<64>, !sinter.buffer<1024>
  return %r : !sinter.buffer<1024>
}

// -----

func.func @copy_buffer_src_too_small(%s: !sinter.buffer<32>, %d: !sinter.buffer<1024>) -> !sinter.buffer<1024> {
  %size = arith.constant 64 : i64
  // expected-error @+1 {{'sinter.copy_buffer' op src buffer holds 32 bytes, needs 64}}
  %r = sinter.copy_buffer %s into %d [size = %size] : !sinter.buffer<32>, !sinter.buffer<1024>
  return %r : !sinter.buffer<1024>
}

// -----

// head_dim is checked even while pos is a Plan parameter.
func.func @rope_odd_head_dim(%q: !sinter.buffer<256>, %k: !sinter.buffer<256>, %pos: i64) -> (!sinter.buffer<256>, !sinter.buffer<256>) {
  %hd = arith.constant 63 : i64
  %one = arith.constant 1 : i64
  // expected-error @+1 {{'sinter.rope' op head_dim 63 is odd; rope rotates pairs}}
  %rq, %rk = sinter.rope %q, %k [pos = %pos, head_dim = %hd, n_heads_q = %one, n_heads_k = %one, freq_base = 10000.0] : !sinter.buffer<256>, !sinter.buffer<256>
  return %rq, %rk : !sinter.buffer<256>, !sinter.buffer<256>
}

// -----

func.func @rope_zero_head_dim(%q: !sinter.buffer<256>, %k: !sinter.buffer<256>, %pos: i64) -> (!sinter.buffer<256>, !sinter.buffer<256>) {
  %hd = arith.constant 0 : i64
  // expected-error @+1 {{'sinter.rope' op head_dim must be positive (the angle divides by it)}}
  %rq, %rk = sinter.rope %q, %k [pos = %pos, head_dim = %hd, n_heads_q = %hd, n_heads_k = %hd, freq_base = 10000.0] : !sinter.buffer<256>, !sinter.buffer<256>
  return %rq, %rk : !sinter.buffer<256>, !sinter.buffer<256>
}

// -----

func.func @rope_k_too_small(%q: !sinter.buffer<256>, %k: !sinter.buffer<128>) -> (!sinter.buffer<256>, !sinter.buffer<128>) {
  %zero = arith.constant 0 : i64
  %hd = arith.constant 16 : i64
  %four = arith.constant 4 : i64
  // expected-error @+1 {{'sinter.rope' op k buffer holds 128 bytes, needs 256}}
  %rq, %rk = sinter.rope %q, %k [pos = %zero, head_dim = %hd, n_heads_q = %four, n_heads_k = %four, freq_base = 10000.0] : !sinter.buffer<256>, !sinter.buffer<128>
  return %rq, %rk : !sinter.buffer<256>, !sinter.buffer<128>
}

// -----

// The scalar's domain is checked whether or not the integers are constants.
func.func @rope_freq_base_below_one(%q: !sinter.buffer<256>, %k: !sinter.buffer<256>, %pos: i64) -> (!sinter.buffer<256>, !sinter.buffer<256>) {
  %hd = arith.constant 16 : i64
  %four = arith.constant 4 : i64
  // expected-error @+1 {{'sinter.rope' op freq_base 0.5 must be finite and at least 1}}
  %rq, %rk = sinter.rope %q, %k [pos = %pos, head_dim = %hd, n_heads_q = %four, n_heads_k = %four, freq_base = 0.5] : !sinter.buffer<256>, !sinter.buffer<256>
  return %rq, %rk : !sinter.buffer<256>, !sinter.buffer<256>
}

// -----

func.func @rms_norm_negative_eps(%x: !sinter.buffer<64>, %w: !sinter.buffer<64>, %o: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %n = arith.constant 16 : i64
  // expected-error @+1 {{'sinter.rms_norm' op eps -1 must be finite and not negative}}
  %r = sinter.rms_norm %x, %w into %o [size = %n, eps = -1.0] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @attn_score_zero_head_dim(%q: !sinter.buffer<64>, %kc: !sinter.buffer<64>, %s: !sinter.buffer<64>, %len: i64) -> !sinter.buffer<64> {
  %zero = arith.constant 0 : i64
  // expected-error @+1 {{'sinter.attn_score' op head_dim must be positive (scores divide by sqrt(head_dim))}}
  %r = sinter.attn_score %q, %kc into %s [head_dim = %zero, seq_len = %len, head_offset = %zero, kv_offset = %zero, kv_stride = %zero] : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @attn_value_cache_too_small(%w: !sinter.buffer<64>, %vc: !sinter.buffer<1024>, %o: !sinter.buffer<128>) -> !sinter.buffer<128> {
  %hd = arith.constant 32 : i64
  %len = arith.constant 4 : i64
  %zero = arith.constant 0 : i64
  %stride = arith.constant 128 : i64
  // (4 - 1) * 128 + 32 = 416 elements, 1664 bytes
  // expected-error @+1 {{'sinter.attn_value' op v_cache buffer holds 1024 bytes, needs 1664}}
  %r = sinter.attn_value %w, %vc into %o [head_dim = %hd, seq_len = %len, kv_offset = %zero, kv_stride = %stride, out_offset = %zero] : !sinter.buffer<64>, !sinter.buffer<1024>, !sinter.buffer<128>
  return %r : !sinter.buffer<128>
}

// -----

// n_cols is checked even while n_rows is a Plan parameter.
func.func @qmatmul_partial_block(%w: !sinter.buffer<4096>, %x: !sinter.buffer<4096>, %o: !sinter.buffer<64>, %rows: i64) -> !sinter.buffer<64> {
  %cols = arith.constant 100 : i64
  // expected-error @+1 {{'sinter.qmatmul' op n_cols 100 is not a multiple of the Q4_0 block size 32}}
  %r = sinter.qmatmul %w, %x into %o [n_rows = %rows, n_cols = %cols, dtype = "Q4_0"] : !sinter.buffer<4096>, !sinter.buffer<4096>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @qmatmul_weights_too_small(%w: !sinter.buffer<500>, %x: !sinter.buffer<256>, %o: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %rows = arith.constant 16 : i64
  %cols = arith.constant 64 : i64
  // expected-error @+1 {{'sinter.qmatmul' op weights buffer holds 500 bytes, needs 576}}
  %r = sinter.qmatmul %w, %x into %o [n_rows = %rows, n_cols = %cols, dtype = "Q4_0"] : !sinter.buffer<500>, !sinter.buffer<256>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @qmatmul_dtype_later(%w: !sinter.buffer<4096>, %x: !sinter.buffer<4096>, %o: !sinter.buffer<64>, %rows: i64, %cols: i64) -> !sinter.buffer<64> {
  // expected-error @+1 {{'sinter.qmatmul' op dtype Q8_K (id 15) is not supported yet}}
  %r = sinter.qmatmul %w, %x into %o [n_rows = %rows, n_cols = %cols, dtype = "Q8_K"] : !sinter.buffer<4096>, !sinter.buffer<4096>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @qmatmul_dtype_not_a_weight(%w: !sinter.buffer<4096>, %x: !sinter.buffer<4096>, %o: !sinter.buffer<64>, %rows: i64, %cols: i64) -> !sinter.buffer<64> {
  // expected-error @+1 {{'sinter.qmatmul' op dtype I32 (id 26) is not a weight format}}
  %r = sinter.qmatmul %w, %x into %o [n_rows = %rows, n_cols = %cols, dtype = "I32"] : !sinter.buffer<4096>, !sinter.buffer<4096>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @qmatmul_dtype_unknown_id(%w: !sinter.buffer<4096>, %x: !sinter.buffer<4096>, %o: !sinter.buffer<64>, %rows: i64, %cols: i64) -> !sinter.buffer<64> {
  // expected-error @+1 {{'sinter.qmatmul' op dtype id 4 is not a GGUF weight format}}
  %r = sinter.qmatmul %w, %x into %o [n_rows = %rows, n_cols = %cols, dtype = 4] : !sinter.buffer<4096>, !sinter.buffer<4096>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @qmatmul_dtype_unknown_name(%w: !sinter.buffer<4096>, %x: !sinter.buffer<4096>, %o: !sinter.buffer<64>, %rows: i64, %cols: i64) -> !sinter.buffer<64> {
  // expected-error @+1 {{unknown dtype "Q9_9"}}
  %r = sinter.qmatmul %w, %x into %o [n_rows = %rows, n_cols = %cols, dtype = "Q9_9"] : !sinter.buffer<4096>, !sinter.buffer<4096>, !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @upload_too_large(%b: !sinter.buffer<64>) -> !sinter.buffer<64> {
  %size = arith.constant 100 : i64
  // expected-error @+1 {{'sinter.upload' op dst buffer holds 64 bytes, host slice has 100}}
  %r = sinter.upload payload 0 into %b [size = %size] : !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @extract_past_end(%b: !sinter.buffer<1024>) -> !sinter.buffer<64> {
  %off = arith.constant 1000 : i64
  // expected-error @+1 {{'sinter.extract' op source buffer holds 1024 bytes, needs bytes [1000, 1064)}}
  %r = sinter.extract %b[%off] : !sinter.buffer<1024> -> !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @insert_larger_than_dest(%s: !sinter.buffer<2048>, %b: !sinter.buffer<1024>, %off: i64) -> !sinter.buffer<1024> {
  // expected-error @+1 {{'sinter.insert' op dest buffer holds 1024 bytes, sub-range has 2048}}
  %r = sinter.insert %s into %b[%off] : !sinter.buffer<2048> into !sinter.buffer<1024>
  return %r : !sinter.buffer<1024>
}

// -----

func.func @kernel_yield_type(%x: !sinter.buffer<256>) -> !sinter.buffer<128> {
  // expected-error @+1 {{'sinter.kernel' op yielded value 0 has type '!sinter.buffer<256>', result has '!sinter.buffer<128>'}}
  %k = sinter.kernel "k" patterns [] (%bx = %x) : (!sinter.buffer<256>) -> (!sinter.buffer<128>) {
    sinter.yield %bx : !sinter.buffer<256>
  }
  return %k : !sinter.buffer<128>
}

// -----

func.func @kernel_yield_count(%x: !sinter.buffer<256>) -> !sinter.buffer<256> {
  // expected-error @+1 {{'sinter.kernel' op yields 0 values for 1 results}}
  %k = sinter.kernel "k" patterns [] (%bx = %x) : (!sinter.buffer<256>) -> (!sinter.buffer<256>) {
    sinter.yield
  }
  return %k : !sinter.buffer<256>
}

// -----

func.func @kernel_captures_from_above(%x: !sinter.buffer<256>, %n: i64) -> !sinter.buffer<256> {
  // expected-note @+1 {{required by region isolation constraints}}
  %k = sinter.kernel "k" patterns [] (%bx = %x) : (!sinter.buffer<256>) -> (!sinter.buffer<256>) {
    // expected-error @+1 {{using value defined outside the region}}
    %s = sinter.silu %bx into %bx [size = %n] : !sinter.buffer<256>, !sinter.buffer<256>
    sinter.yield %s : !sinter.buffer<256>
  }
  return %k : !sinter.buffer<256>
}

// -----

func.func @yield_outside_kernel(%x: !sinter.buffer<256>) {
  // expected-error @+1 {{'sinter.yield' op expects parent op 'sinter.kernel'}}
  sinter.yield %x : !sinter.buffer<256>
}

// -----

func.func @extract_negative_offset(%b: !sinter.buffer<1024>) -> !sinter.buffer<64> {
  %off = arith.constant -8 : i64
  // expected-error @+1 {{'sinter.extract' op offset is negative (-8)}}
  %r = sinter.extract %b[%off] : !sinter.buffer<1024> -> !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

func.func @upload_negative_payload(%b: !sinter.buffer<64>, %n: i64) -> !sinter.buffer<64> {
  // expected-error @+1 {{'sinter.upload' op payload index is negative (-1)}}
  %r = sinter.upload payload -1 into %b [size = %n] : !sinter.buffer<64>
  return %r : !sinter.buffer<64>
}

// -----

// The custom syntax always makes matching block arguments; the generic form can get them wrong.
func.func @kernel_argument_type(%x: !sinter.buffer<256>) -> !sinter.buffer<256> {
  // expected-error @+1 {{'sinter.kernel' op body argument 0 has type '!sinter.buffer<128>', input has '!sinter.buffer<256>'}}
  %k = "sinter.kernel"(%x) <{name = "k", patterns = []}> ({
  ^bb0(%a: !sinter.buffer<128>):
    "sinter.yield"(%x) : (!sinter.buffer<256>) -> ()
  }) : (!sinter.buffer<256>) -> !sinter.buffer<256>
  return %k : !sinter.buffer<256>
}

// -----

func.func @kernel_argument_count(%x: !sinter.buffer<256>) -> () {
  // expected-error @+1 {{'sinter.kernel' op body has 0 arguments for 1 inputs}}
  "sinter.kernel"(%x) <{name = "k", patterns = []}> ({
    "sinter.yield"() : () -> ()
  }) : (!sinter.buffer<256>) -> ()
  return
}
