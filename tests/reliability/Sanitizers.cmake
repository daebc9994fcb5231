# Sanitizers.cmake - ASan+UBSan twins of the plain-C++ libraries and of the tests over them.
#
# CI's default run cannot afford a second build of everything under a sanitizer (the MLIR- and
# LLVM-heavy files of ir/, passes/ and codegen/ are most of the build time). So the main build
# also compiles a twin of every library that holds no MLIR code (support, runtime, the plain half
# of codegen, backends, the Vulkan runtime, the model driver, the conformance runner) and of the
# chosen tests with -fsanitize=address,undefined, and links each twin test against the twins
# first and the uninstrumented MLIR-heavy libraries after them. Everything the engine-facing
# path executes outside MLIR and the LLVM JIT is then checked: validation, recording, the plan
# cache, the interpreter, the reference kernels, the cpu plans, Vulkan memory and transfers, the
# C ABI. The twin tests are CTest tests named "asan.<Suite>.<Test>" with the label "asan".
# tools/run-long-tests.sh builds everything (MLIR included) under ASan+UBSan, and the concurrency
# tests under TSan, in build dirs of their own.
option(SINTER_SANITIZER_TWINS "Build and test ASan+UBSan twins of the plain-C++ libraries" ON)
if(NOT SINTER_SANITIZER_TWINS)
  return()
endif()

# UBSan's vptr check needs RTTI, which the MLIR-heavy libraries are built without.
set(SINTER_SAN_FLAGS -fsanitize=address,undefined -fno-sanitize=vptr
  -fno-sanitize-recover=undefined -fno-omit-frame-pointer)

# The sources of `target` as absolute paths (generator expressions dropped).
function(sinter_san_sources target out)
  get_target_property(srcs ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  set(files)
  foreach(s IN LISTS srcs)
    if(s MATCHES "^\\$<")
      continue()
    endif()
    if(IS_ABSOLUTE "${s}")
      list(APPEND files "${s}")
    else()
      list(APPEND files "${dir}/${s}")
    endif()
  endforeach()
  set(${out} ${files} PARENT_SCOPE)
endfunction()

# `lib`San: the same sources with the same flags plus the sanitizers. It links `lib` itself
# after it, for the usage requirements and for anything the twin does not define.
function(sinter_san_library lib)
  if(NOT TARGET ${lib})
    return()
  endif()
  sinter_san_sources(${lib} files)
  add_library(${lib}San STATIC ${files})
  target_include_directories(${lib}San PRIVATE $<TARGET_PROPERTY:${lib},INCLUDE_DIRECTORIES>)
  target_compile_definitions(${lib}San PRIVATE $<TARGET_PROPERTY:${lib},COMPILE_DEFINITIONS>)
  target_compile_options(${lib}San PRIVATE $<TARGET_PROPERTY:${lib},COMPILE_OPTIONS>
    ${SINTER_SAN_FLAGS})
  target_link_libraries(${lib}San PUBLIC ${lib})
  get_target_property(deps ${lib} MANUALLY_ADDED_DEPENDENCIES)
  if(deps)
    add_dependencies(${lib}San ${deps})
  endif()
endfunction()

# The twin of gtest binary `test`, linked against the twins named in LIBS (most dependent
# first), registered as asan.<Suite>.<Test> with the given extra ENVIRONMENT.
function(sinter_san_test test)
  cmake_parse_arguments(ARG "NO_LEAK_CHECK" "" "LIBS;ENVIRONMENT" ${ARGN})
  if(NOT TARGET ${test})
    return()
  endif()
  sinter_san_sources(${test} files)
  set(name ${test}San)
  if(ARG_NO_LEAK_CHECK)
    list(APPEND files ${CMAKE_CURRENT_SOURCE_DIR}/NoLeakCheck.cpp)
  endif()
  add_executable(${name} ${files})
  target_include_directories(${name} PRIVATE $<TARGET_PROPERTY:${test},INCLUDE_DIRECTORIES>)
  target_compile_definitions(${name} PRIVATE $<TARGET_PROPERTY:${test},COMPILE_DEFINITIONS>)
  target_compile_options(${name} PRIVATE ${SINTER_SAN_FLAGS})
  target_link_options(${name} PRIVATE ${SINTER_SAN_FLAGS})
  set(libs)
  foreach(lib IN LISTS ARG_LIBS)
    if(TARGET ${lib}San)
      list(APPEND libs ${lib}San)
    elseif(TARGET ${lib})
      list(APPEND libs ${lib})
    endif()
  endforeach()
  get_target_property(original_libs ${test} LINK_LIBRARIES)
  target_link_libraries(${name} PRIVATE ${libs} ${original_libs})
  get_target_property(deps ${test} MANUALLY_ADDED_DEPENDENCIES)
  if(deps)
    add_dependencies(${name} ${deps})
  endif()
  set(leaks 1)
  if(ARG_NO_LEAK_CHECK)
    set(leaks 0)
  endif()
  set(env "SINTER_SHARED_DIR=${SINTER_SHARED_DIR}"
    "ASAN_OPTIONS=detect_leaks=${leaks}:abort_on_error=1:detect_stack_use_after_return=1"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/lsan.supp" ${ARG_ENVIRONMENT})
  # The list reaches set_tests_properties through seven list expansions in GoogleTest.cmake and
  # GoogleTestAddTests.cmake (CMake 3.25, Debian 12's, which tools/setup.sh installs), each taking
  # one backslash off an escaped ';'. Left unescaped it came out as `ENVIRONMENT a b c`: `a` set,
  # `b` taken for a property name. `ctest -V -R asan.` shows each test's variables.
  string(REPLACE ";" "\\\\\\\\\\\\\\;" env "${env}")
  gtest_discover_tests(${name} TEST_PREFIX "asan." DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120
    PROPERTIES LABELS asan ENVIRONMENT "${env}")
endfunction()

foreach(lib SinterSupport SinterRuntime SinterCodegen SinterVulkan SinterVulkanPlan SinterBackends
    SinterModel SinterConformance)
  sinter_san_library(${lib})
endforeach()

# Most dependent first: the linker resolves each twin's references from the twins after it.
set(san_libs SinterConformance SinterModel SinterBackends SinterVulkanPlan SinterVulkan
  SinterCodegen SinterRuntime SinterSupport)

# The CI-default set: the engine-facing API and its errors, the lazy runtime, the cpu kind, the
# conformance table on every kind (lavapipe included where the Vulkan kind is built), whole-model
# decodes, fault injection and a shorter soak.
foreach(test ReferenceBackendTest ErrorsTest ConcurrencyTest FactoryTest OpsTest CpuBackendTest
    PlanCacheTest LazyBackendTest Stories260KTest Stories260KCpuTest LazyDecodeTest)
  sinter_san_test(${test} LIBS ${san_libs})
endforeach()
sinter_san_test(SoakTest LIBS ${san_libs} ENVIRONMENT "SINTER_SOAK_CALLS=200000")
# The scalar soak creates Vulkan devices (see below) and evicts kernels, pipelines and JIT code
# while plans still hold them: 400 values on cpu (a steady state, whose live heap is checked),
# 40 on vulkan (the caches turn over and the bounds are checked every flush, but the run is too
# short for the memory checks, which the main build's run makes).
sinter_san_test(ScalarSoakTest NO_LEAK_CHECK LIBS ${san_libs} ENVIRONMENT "SINTER_SOAK_SCALARS=400")
# Tests that create many Vulkan devices: lavapipe's JIT-compiled shader code leaves a few
# 128-byte reallocs unfreed per process (no Sinter frame in the stacks, which LSan cannot match
# to a module), so these run with leak detection off; ASan's other checks and UBSan stay on.
foreach(test ConformanceTest ExtremeArgsTest MemoryLimitTest VulkanRuntimeTest VulkanBackendTest
    FaultInjectionTest)
  sinter_san_test(${test} NO_LEAK_CHECK LIBS ${san_libs})
endforeach()
