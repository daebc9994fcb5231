// Passes.td - every sinter pass: name (= flag = file = kill-switch name), summary, description.
//
// The fusion passes form sinter.kernel regions from runs of adjacent ops; the cleanup passes
// remove versions nobody observes. passes/Pipeline.cpp lists them in order.

#ifndef SINTER_PASSES_TD
#define SINTER_PASSES_TD

include "mlir/Pass/PassBase.td"

class SinterFuncPass<string flag> : Pass<flag, "::mlir::func::FuncOp"> {
  let dependentDialects = ["::sinter::ir::SinterDialect", "::mlir::arith::ArithDialect"];
}

def ForwardCopies : SinterFuncPass<"forward-copies"> {
  let summary = "reads of a whole-buffer copy read the copy's source instead";
  let description = [{
    For `%d1 = sinter.copy_buffer %s into %d0` that copies every byte of equally sized buffers,
    each read of `%d1` becomes a read of `%s` when no op between the copy and the reader writes the
    slot of `%s` (the reader itself may, if it is an element-wise in-place op on the same range).
    The copy itself stays while anyone still needs `%d1` (the host, a partial write);
    eliminate-dead-versions removes it otherwise.
  }];
}

def EliminateDeadVersions : SinterFuncPass<"eliminate-dead-versions"> {
  let summary = "erase writes whose version nobody reads";
  let description = [{
    A graph op or upload whose every result is unused, or used only as the old version of a later
    op that overwrites every byte of it, is erased (those later ops take the older version
    instead). The versions the host can observe are the function's results and stay.
  }];
}

def FuseAttention : SinterFuncPass<"fuse-attention"> {
  let summary = "attn_score -> softmax -> attn_value over all heads becomes one kernel";
  let description = [{
    A run of per-head triples (scores of a head, their softmax, the weighted sum of values),
    each reading the previous op's result, becomes one `attention` kernel. GQA head mapping and a
    split over the sequence are schedule choices of the code generator.
  }];
}

def FuseRmsNormQMatmul : SinterFuncPass<"fuse-rmsnorm-qmatmul"> {
  let summary = "rms_norm becomes the prologue of the contractions that read it";
  let description = [{
    rms_norm followed by contractions (qmatmul, matmul) whose input vector is the norm's result
    becomes one kernel: since W (x*g/r) = (W (x*g))/r, one pass over x yields the sum of squares
    and the dot products. The contractions after the first join only while `horizontal` is on.
  }];
  let options = [Option<"horizontal", "horizontal", "bool", "true",
                        "also fuse the sibling contractions that read the norm">];
}

def FuseHorizontal : SinterFuncPass<"fuse-horizontal"> {
  let summary = "adjacent contractions reading the same vector become one kernel";
}

def FuseRopeEpilogue : SinterFuncPass<"fuse-rope-epilogue"> {
  let summary = "rope on a contraction's results joins that contraction's kernel";
}

def FuseKvWrite : SinterFuncPass<"fuse-kv-write"> {
  let summary = "copies of a kernel's K/V results into the cache join the kernel";
  let description = [{
    A copy_buffer_offset right after a kernel, reading a version the kernel produced, joins it:
    the kernel stores K and V straight into the cache slot.
  }];
}

def FuseSwiglu : SinterFuncPass<"fuse-swiglu"> {
  let summary = "silu(gate) * up joins the gate/up contraction kernel";
}

def FuseResidualAdd : SinterFuncPass<"fuse-residual-add"> {
  let summary = "add of a contraction's result joins the contraction's kernel";
  let description = [{
    add reading a result of the contraction right before it joins that kernel's epilogue; a
    copy_buffer of the sum right after (the residual copy the host may still observe) joins too.
  }];
}

def FuseElementwise : SinterFuncPass<"fuse-elementwise"> {
  let summary = "runs of chained element-wise ops become one kernel";
}

#endif // SINTER_PASSES_TD
