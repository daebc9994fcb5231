// Plan.cpp - out-of-line destructors of the Plan interfaces (their vtables live here).
#include "support/Plan.h"

namespace sinter {

Plan::~Plan() = default;
PlanCompiler::~PlanCompiler() = default;

} // namespace sinter
