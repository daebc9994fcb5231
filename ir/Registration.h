// Registration.h - how tools and passes make the sinter dialect available (a light header).
//
// Only forward declarations of MLIR types: a file that merely needs a context with the dialect
// loaded (sinter-opt, the plan cache's miss path) does not pay for the dialect's generated headers.
#ifndef SINTER_IR_REGISTRATION_H
#define SINTER_IR_REGISTRATION_H

#include <memory>

namespace mlir {
class DialectRegistry;
class MLIRContext;
} // namespace mlir

namespace sinter::ir {

/// Adds the sinter dialect and the dialects its modules use (func, arith) to `registry`.
void registerSinterDialect(mlir::DialectRegistry &registry);

/// A context with sinter, func and arith registered and loaded. Multithreading is off unless
/// asked for: building and verifying one trace module is single-threaded work, and a context
/// without a thread pool is cheap to make.
std::unique_ptr<mlir::MLIRContext> makeSinterContext(bool multithreaded = false);

} // namespace sinter::ir

#endif // SINTER_IR_REGISTRATION_H
