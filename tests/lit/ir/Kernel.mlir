// Kernel.mlir - a fused kernel as a sinter.kernel region: captured inputs become block arguments,
// sinter.yield returns the versions the kernel produces, attributes survive a round trip.
// RUN: sinter-opt %s -split-input-file | sinter-opt -split-input-file | FileCheck %s

// The rms_norm -> qmatmul pattern (ARCHITECTURE.md, Fusion 1): the normalized temporary never
// leaves the kernel, so only the matrix-vector product's version is yielded.
// CHECK-LABEL: func.func @rmsnorm_qmatmul
// CHECK-SAME: (%[[X:[^:]+]]: !sinter.buffer<256>, %[[G:[^:]+]]: !sinter.buffer<256>, %[[T:[^:]+]]: !sinter.buffer<256>, %[[W:[^:]+]]: !sinter.buffer<576>, %[[O:[^:]+]]: !sinter.buffer<64>)
func.func @rmsnorm_qmatmul(%x: !sinter.buffer<256>, %g: !sinter.buffer<256>, %tmp: !sinter.buffer<256>,
                           %w: !sinter.buffer<576>, %out: !sinter.buffer<64>) -> !sinter.buffer<64> {
  // CHECK: %[[K:.+]] = sinter.kernel "rms_norm_qmatmul_0" patterns ["rmsnorm-qmatmul"]
  // CHECK-SAME: (%[[BX:[^ ]+]] = %[[X]], %[[BG:[^ ]+]] = %[[G]], %[[BT:[^ ]+]] = %[[T]], %[[BW:[^ ]+]] = %[[W]], %[[BO:[^ ]+]] = %[[O]])
  // CHECK-SAME: : (!sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<576>, !sinter.buffer<64>) -> (!sinter.buffer<64>)
  // CHECK-SAME: attributes {sinter.schedule = "rows=4"} {
  %k = sinter.kernel "rms_norm_qmatmul_0" patterns ["rmsnorm-qmatmul"]
      (%bx = %x, %bg = %g, %bt = %tmp, %bw = %w, %bo = %out)
      : (!sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<576>, !sinter.buffer<64>)
      -> (!sinter.buffer<64>) attributes {sinter.schedule = "rows=4"} {
    // Constants live inside: the region is isolated from above.
    // CHECK-DAG: %[[SIZE:.+]] = arith.constant 64 : i64
    // CHECK-DAG: %[[ROWS:.+]] = arith.constant 16 : i64
    %size = arith.constant 64 : i64
    %rows = arith.constant 16 : i64
    // CHECK: %[[N:.+]] = sinter.rms_norm %[[BX]], %[[BG]] into %[[BT]] [size = %[[SIZE]], eps = 9.99999974E-6]
    %n = sinter.rms_norm %bx, %bg into %bt [size = %size, eps = 1.0e-5]
        : !sinter.buffer<256>, !sinter.buffer<256>, !sinter.buffer<256>
    // CHECK: %[[Y:.+]] = sinter.qmatmul %[[BW]], %[[N]] into %[[BO]] [n_rows = %[[ROWS]], n_cols = %[[SIZE]], dtype = "Q4_0"]
    %y = sinter.qmatmul %bw, %n into %bo [n_rows = %rows, n_cols = %size, dtype = "Q4_0"]
        : !sinter.buffer<576>, !sinter.buffer<256>, !sinter.buffer<64>
    // CHECK: sinter.yield %[[Y]] : !sinter.buffer<64>
    sinter.yield %y : !sinter.buffer<64>
  }
  // CHECK: return %[[K]]
  return %k : !sinter.buffer<64>
}

// -----

// Horizontal fusion (Fusion 2) yields several versions; a dynamic integer (a Plan parameter) is
// captured like any other input.
// CHECK-LABEL: func.func @two_results
func.func @two_results(%x: !sinter.buffer<64>, %a: !sinter.buffer<64>, %b: !sinter.buffer<64>, %n: i64)
    -> (!sinter.buffer<64>, !sinter.buffer<64>) {
  // CHECK: %[[K:.+]]:2 = sinter.kernel "silu_pair" patterns ["horizontal", "swiglu"]
  // CHECK-SAME: -> (!sinter.buffer<64>, !sinter.buffer<64>) {
  %k:2 = sinter.kernel "silu_pair" patterns ["horizontal", "swiglu"] (%bx = %x, %ba = %a, %bb = %b, %bn = %n)
      : (!sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>, i64) -> (!sinter.buffer<64>, !sinter.buffer<64>) {
    %s = sinter.silu %bx into %ba [size = %bn] : !sinter.buffer<64>, !sinter.buffer<64>
    %m = sinter.element_mul %s, %bx into %bb [size = %bn]
        : !sinter.buffer<64>, !sinter.buffer<64>, !sinter.buffer<64>
    sinter.yield %s, %m : !sinter.buffer<64>, !sinter.buffer<64>
  }
  // CHECK: return %[[K]]#0, %[[K]]#1
  return %k#0, %k#1 : !sinter.buffer<64>, !sinter.buffer<64>
}
