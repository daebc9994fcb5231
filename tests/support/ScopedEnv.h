// ScopedEnv.h - sets an environment variable for one scope and restores the old value.
#ifndef SINTER_TESTS_SUPPORT_SCOPEDENV_H
#define SINTER_TESTS_SUPPORT_SCOPEDENV_H

#include <cstdlib>
#include <string>

namespace sinter::test {

class ScopedEnv {
public:
  /// `value` nullptr unsets the variable.
  ScopedEnv(const char *name, const char *value) : name_(name) {
    const char *old = std::getenv(name);
    hadOld_ = old != nullptr;
    if (old)
      old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (hadOld_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name_;
  bool hadOld_ = false;
  std::string old_;
};

} // namespace sinter::test

#endif // SINTER_TESTS_SUPPORT_SCOPEDENV_H
