// TraceToIRTest.cpp - tests of ir/TraceToIR.cpp: a hand-built Trace becomes the expected module.
//
// Checks the properties the passes rely on: one argument per slot and per parameter, versions in
// program order (a read sees the version current at its position), shared constants, results only
// for observable buffers that were written, and that the text verifies and parses back.
#include "ir/TraceToIR.h"
#include "ir/TraceToModule.h"

#include <memory>
#include <string>

#include "ir/Registration.h"
#include "ir/SinterDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sinter::ir {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

BufferHandle slot(uint32_t s) { return Trace::handleOfSlot(s); }

TraceEntry opEntry(const OpCall &op) {
  TraceEntry e;
  e.kind = TraceEntry::Kind::Op;
  e.op = op;
  return e;
}

// Slots: 0 x (uploaded), 1 norm weight, 2 normalized temp (freed), 3 Q4_0 weights (16 x 64),
// 4 output, 5 K cache. The copy reads slot 4 before silu overwrites it in place.
Trace sampleTrace() {
  Trace t;
  t.buffers = {{256, true}, {256, true}, {256, false}, {576, true}, {64, true}, {1024, true}};
  TraceEntry upload;
  upload.kind = TraceEntry::Kind::Upload;
  upload.uploadSlot = 0;
  upload.uploadBytes = 256;
  upload.payload = 0;
  t.entries.push_back(upload);
  t.entries.push_back(opEntry(ops::rmsNorm(slot(0), slot(1), slot(2), 64, 1e-5f)));
  t.entries.push_back(
      opEntry(ops::quantizedMatmul(slot(3), slot(2), slot(4), 16, 64, DType::Q4_0)));
  t.entries.push_back(opEntry(ops::copyBufferOffset(slot(4), slot(5), 0, 128, 64)));
  t.entries.push_back(opEntry(ops::silu(slot(4), slot(4), 16)));
  t.payloads.push_back(std::make_shared<const std::vector<uint8_t>>(256, 0));
  return t;
}

// The dst_offset of the copy (entry 3, integer 1) is a Plan parameter.
const std::vector<IntSlot> kParams = {IntSlot{3, 1}};

size_t count(const std::string &text, const std::string &needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

TEST(TraceToIRTest, SignatureHasSlotsThenParamsAndObservableWrittenResults) {
  absl::StatusOr<std::string> text = traceToMlirText(sampleTrace(), kParams);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("func.func @trace(%arg0: !sinter.buffer<256> {sinter.slot = 0 : "
                               "i64}, %arg1: !sinter.buffer<256> {sinter.slot = 1 : i64}"));
  EXPECT_THAT(*text, HasSubstr("%arg5: !sinter.buffer<1024> {sinter.slot = 5 : i64}, "
                               "%arg6: i64 {sinter.param = array<i64: 3, 1>})"));
  // Slot 2 was freed and slots 1 and 3 were only read: only 0, 4 and 5 come back.
  EXPECT_THAT(*text, HasSubstr("-> (!sinter.buffer<256> {sinter.slot = 0 : i64}, "
                               "!sinter.buffer<64> {sinter.slot = 4 : i64}, "
                               "!sinter.buffer<1024> {sinter.slot = 5 : i64})"));
}

TEST(TraceToIRTest, OpsFollowTraceOrderWithSharedConstants) {
  absl::StatusOr<std::string> text = traceToMlirText(sampleTrace(), kParams);
  ASSERT_TRUE(text.ok()) << text.status();
  // 64 serves rms_norm's size, qmatmul's n_cols and the copy's size; 128 became %arg6.
  EXPECT_EQ(count(*text, "arith.constant 64 : i64"), 1u) << *text;
  EXPECT_THAT(*text, Not(HasSubstr("arith.constant 128")));
  const char *inOrder[] = {
      "%0 = sinter.upload payload 0 into %arg0 [size = %c256_i64] : !sinter.buffer<256>",
      "%1 = sinter.rms_norm %0, %arg1 into %arg2 [size = %c64_i64, eps = 9.99999974E-6]",
      "%2 = sinter.qmatmul %arg3, %1 into %arg4 [n_rows = %c16_i64, n_cols = %c64_i64, "
      "dtype = \"Q4_0\"]",
      "%3 = sinter.copy_buffer_offset %2 into %arg5 [src_offset = %c0_i64, dst_offset = %arg6, "
      "size = %c64_i64]",
      "%4 = sinter.silu %2 into %2 [size = %c16_i64]",
      "return %0, %4, %3 : !sinter.buffer<256>, !sinter.buffer<64>, !sinter.buffer<1024>",
  };
  size_t at = 0;
  for (const char *line : inOrder) {
    size_t found = text->find(line, at);
    ASSERT_NE(found, std::string::npos) << "missing or out of order: " << line << "\n" << *text;
    at = found;
  }
}

TEST(TraceToIRTest, TextVerifiesAndParsesBackToTheSameModule) {
  absl::StatusOr<std::string> text = traceToMlirText(sampleTrace(), kParams);
  ASSERT_TRUE(text.ok()) << text.status();
  std::unique_ptr<mlir::MLIRContext> context = makeSinterContext();
  mlir::OwningOpRef<mlir::ModuleOp> parsed =
      mlir::parseSourceString<mlir::ModuleOp>(*text, context.get());
  ASSERT_TRUE(parsed) << *text;
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*parsed)));
  std::string reprinted;
  llvm::raw_string_ostream os(reprinted);
  parsed->print(os);
  EXPECT_EQ(reprinted, *text);
}

TEST(TraceToIRTest, WriteAfterReadKeepsTheOlderVersionForTheRead) {
  std::unique_ptr<mlir::MLIRContext> context = makeSinterContext();
  auto module = buildTraceModule(*context, sampleTrace(), kParams);
  ASSERT_TRUE(module.ok()) << module.status();
  auto func = (*module)->lookupSymbol<mlir::func::FuncOp>("trace");
  ASSERT_TRUE(func);
  QMatmulOp qmatmul;
  CopyBufferOffsetOp copy;
  SiluOp silu;
  func.walk([&](mlir::Operation *op) {
    if (auto q = llvm::dyn_cast<QMatmulOp>(op))
      qmatmul = q;
    if (auto c = llvm::dyn_cast<CopyBufferOffsetOp>(op))
      copy = c;
    if (auto s = llvm::dyn_cast<SiluOp>(op))
      silu = s;
  });
  ASSERT_TRUE(qmatmul && copy && silu);
  EXPECT_EQ(copy.getSrc(), qmatmul.getResult());
  EXPECT_EQ(silu.getIn(), qmatmul.getResult());
  EXPECT_EQ(silu.getOut(), qmatmul.getResult());
  auto ret = llvm::cast<mlir::func::ReturnOp>(func.getBody().front().getTerminator());
  EXPECT_EQ(ret.getOperand(1), silu.getResult());
  EXPECT_EQ(func.getResultAttrOfType<mlir::IntegerAttr>(1, kSlotAttrName).getInt(), 4);
  EXPECT_EQ(qmatmul.getDtype(), uint32_t(DType::Q4_0));
}

TEST(TraceToIRTest, UploadBytesCanBeAParameter) {
  absl::StatusOr<std::string> text = traceToMlirText(sampleTrace(), {IntSlot{0, 0}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("sinter.upload payload 0 into %arg0 [size = %arg6]"));
}

TEST(TraceToIRTest, RopeWritesBothBuffers) {
  Trace t;
  t.buffers = {{256, true}, {128, true}};
  t.entries.push_back(opEntry(ops::rope(slot(0), slot(1), 7, 16, 10000.0f, 4, 2)));
  absl::StatusOr<std::string> text = traceToMlirText(t, {IntSlot{0, 0}});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("%q_result, %k_result = sinter.rope %arg0, %arg1 [pos = %arg2"));
  EXPECT_THAT(*text, HasSubstr("return %q_result, %k_result"));
}

TEST(TraceToIRTest, RejectsParamsThatNameNoInteger) {
  Trace t = sampleTrace();
  absl::Status entry = traceToMlirText(t, {IntSlot{9, 0}}).status();
  EXPECT_EQ(entry.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(entry.message(), "parameter 0 names entry 9, trace has 5");
  absl::Status index = traceToMlirText(t, {IntSlot{1, 1}}).status();
  EXPECT_EQ(index.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index.message(), "parameter 0 names integer 1 of entry 1, which has 1");
  absl::Status twice = traceToMlirText(t, {IntSlot{3, 1}, IntSlot{3, 1}}).status();
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(twice.message(), "parameter 1 repeats integer 1 of entry 3");
}

TEST(TraceToIRTest, RejectsMalformedEntries) {
  Trace badSlot = sampleTrace();
  badSlot.entries.push_back(opEntry(ops::silu(slot(0), slot(9), 4)));
  absl::Status st = traceToMlirText(badSlot, {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "entry 5 names buffer slot 9, trace has 6");

  Trace badPayload = sampleTrace();
  badPayload.entries[0].payload = 3;
  st = traceToMlirText(badPayload, {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "entry 0 uploads payload 3, trace has 1");
}

TEST(TraceToIRTest, AnOpTheVerifierRejectsIsInternalWithTheDiagnostic) {
  Trace t;
  t.buffers = {{8192, true}, {256, true}, {8192, true}};
  t.entries.push_back(opEntry(ops::rmsNorm(slot(0), slot(1), slot(2), 2048, 1e-5f)));
  absl::Status st = traceToMlirText(t, {}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("entry 0: rms_norm"));
  EXPECT_THAT(st.message(), HasSubstr("'sinter.rms_norm' op weight buffer holds 256 bytes, "
                                      "needs 8192"));
}

} // namespace
} // namespace sinter::ir
