// NoLeakCheck.cpp - linked into the sanitizer twins registered NO_LEAK_CHECK (Sanitizers.cmake).
//
// Their ctest runs already set ASAN_OPTIONS=detect_leaks=0, but CTest's test discovery
// (gtest_discover_tests runs `--gtest_list_tests` at test time) does not take the tests'
// environment, and a binary that creates a lavapipe device while listing its cases then fails on
// lavapipe's own unfreed JIT allocations. The default options make discovery behave like the runs.
extern "C" const char *__asan_default_options() { return "detect_leaks=0"; }
