# Kernel manifest → generated translation units → the fmha library.
#
# src/instantiations/manifest.cmake lists one entry per (operation, dtype, head dim) with the kernel sets it belongs
# to. For each entry in FMHA_KERNEL_SET this file generates <build>/generated/<op>_<dtype>_d<hdim>.cu from
# src/instantiations/<op>.cu.in, and a registry (generated/registry.cpp) that maps the entry to its launch function.
# Entries left out of the set are still known to the registry, which reports them as kNotBuilt.

set(FMHA_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${FMHA_GENERATED_DIR})

set(FMHA_MANIFEST_ENTRIES "")
# fmha_kernel(<op> <dtype> <head dim> [DV <head dim of V>] [OUT <output dtype>] SETS <set>...): DV defaults to the
# head dim, OUT to the dtype. The registry key is (op, dtype, output dtype, head dim, head dim of V).
# Registry enum names of the manifest's words (an unknown word is a configure error, not a silent typo).
set(FMHA_OP_ENUM_fwd kFwd)
set(FMHA_OP_ENUM_decode kDecode)
set(FMHA_OP_ENUM_bwd kBwd)
set(FMHA_DTYPE_ENUM_fp16 kFP16)
set(FMHA_DTYPE_ENUM_bf16 kBF16)
set(FMHA_DTYPE_ENUM_e4m3 kFP8E4M3)
set(FMHA_DTYPE_ENUM_e5m2 kFP8E5M2)
if(NOT FMHA_KERNEL_SET MATCHES "^(none|ci|full)$")
  message(FATAL_ERROR "FMHA_KERNEL_SET: expected none, ci or full, got '${FMHA_KERNEL_SET}'")
endif()
function(fmha_kernel op dtype hdim)
  cmake_parse_arguments(K "" "DV;OUT" "SETS" ${ARGN})
  set(where "src/instantiations/manifest.cmake: fmha_kernel(${op} ${dtype} ${hdim} ${ARGN})")
  if(K_UNPARSED_ARGUMENTS OR NOT K_SETS)
    message(FATAL_ERROR "${where}: expected [DV <n>] [OUT <dtype>] SETS <set>..., got '${K_UNPARSED_ARGUMENTS}' "
                        "outside them")
  endif()
  if(NOT DEFINED FMHA_OP_ENUM_${op} OR NOT DEFINED FMHA_DTYPE_ENUM_${dtype})
    message(FATAL_ERROR "${where}: unknown operation '${op}' or dtype '${dtype}'")
  endif()
  if(NOT DEFINED K_DV)
    set(K_DV ${hdim})
  endif()
  if(NOT DEFINED K_OUT)
    set(K_OUT ${dtype})
  endif()
  if(NOT DEFINED FMHA_DTYPE_ENUM_${K_OUT} OR NOT hdim MATCHES "^[1-9][0-9]*$" OR NOT K_DV MATCHES "^[1-9][0-9]*$")
    message(FATAL_ERROR "${where}: expected positive head dims and a known output dtype, got ${hdim} / DV ${K_DV} / "
                        "OUT ${K_OUT}")
  endif()
  foreach(e ${FMHA_MANIFEST_ENTRIES})
    if(e MATCHES "^${op}\\|${dtype}\\|${hdim}\\|${K_DV}\\|${K_OUT}\\|")
      message(FATAL_ERROR "${where}: a second unit with the same registry key")
    endif()
  endforeach()
  # The unit templates (src/instantiations/<op>.cu.in) instantiate one element type; bwd.cu.in alone takes a head
  # dim of V of its own (@FMHA_HDIM_V@): another op's unit with another V head dim or output type needs its template
  # first.
  if((NOT K_DV EQUAL hdim AND NOT op STREQUAL "bwd") OR NOT K_OUT STREQUAL dtype)
    message(FATAL_ERROR "${where}: DV ${K_DV} / OUT ${K_OUT}: src/instantiations/${op}.cu.in has no head dim of V "
                        "or output type of its own yet (expected DV ${hdim}, OUT ${dtype})")
  endif()
  string(REPLACE ";" " " sets "${K_SETS}")
  set(FMHA_MANIFEST_ENTRIES ${FMHA_MANIFEST_ENTRIES} "${op}|${dtype}|${hdim}|${K_DV}|${K_OUT}|${sets}" PARENT_SCOPE)
endfunction()
include(${PROJECT_SOURCE_DIR}/src/instantiations/manifest.cmake)

set(FMHA_KERNEL_SOURCES "")
set(FMHA_REGISTRY_DECLS "")
set(FMHA_REGISTRY_ROWS "")
foreach(entry ${FMHA_MANIFEST_ENTRIES})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 FMHA_OP)
  list(GET parts 1 FMHA_DTYPE)
  list(GET parts 2 FMHA_HDIM)
  list(GET parts 3 FMHA_HDIM_V)
  list(GET parts 4 FMHA_OUT_DTYPE)
  list(GET parts 5 sets)
  string(REPLACE " " ";" sets "${sets}")
  set(name "${FMHA_OP}_${FMHA_DTYPE}_d${FMHA_HDIM}")
  if(NOT FMHA_HDIM_V EQUAL FMHA_HDIM)
    string(APPEND name "_dv${FMHA_HDIM_V}")
  endif()
  if(NOT FMHA_OUT_DTYPE STREQUAL FMHA_DTYPE)
    string(APPEND name "_out_${FMHA_OUT_DTYPE}")
  endif()
  set(FMHA_DTYPE_ENUM ${FMHA_DTYPE_ENUM_${FMHA_DTYPE}})
  set(key "{Op::${FMHA_OP_ENUM_${FMHA_OP}}, DType::${FMHA_DTYPE_ENUM}, DType::${FMHA_DTYPE_ENUM_${FMHA_OUT_DTYPE}}, "
          "${FMHA_HDIM}, ${FMHA_HDIM_V}}")
  string(REPLACE ";" "" key "${key}")
  set(built 0)
  if(FMHA_KERNEL_SET IN_LIST sets)
    set(built 1)
    set(FMHA_UNIT_NAME ${name})
    configure_file(${PROJECT_SOURCE_DIR}/src/instantiations/${FMHA_OP}.cu.in ${FMHA_GENERATED_DIR}/${name}.cu @ONLY)
    list(APPEND FMHA_KERNEL_SOURCES ${FMHA_GENERATED_DIR}/${name}.cu)
    string(APPEND FMHA_REGISTRY_DECLS "${FMHA_OP}_launch_fn ${name}_launch;\n")
    string(APPEND FMHA_REGISTRY_ROWS "    {${key}, reinterpret_cast<void*>(&${name}_launch)},\n")
  else()
    string(APPEND FMHA_REGISTRY_ROWS "    {${key}, nullptr},\n")
  endif()
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/src/instantiations/registry.cpp.in ${FMHA_GENERATED_DIR}/registry.cpp @ONLY)

file(GLOB FMHA_API_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/api/*.cpp)
list(REMOVE_ITEM FMHA_API_SOURCES ${PROJECT_SOURCE_DIR}/src/api/c_api.cpp)
add_library(fmha STATIC ${FMHA_API_SOURCES} ${FMHA_GENERATED_DIR}/registry.cpp ${FMHA_KERNEL_SOURCES})
add_library(fmha::fmha ALIAS fmha)
target_include_directories(fmha PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:include>
                           PRIVATE ${PROJECT_SOURCE_DIR}/src)
# CUDA::cudart carries the CUDA include path (the public headers include cuda_runtime_api.h) and the runtime.
target_link_libraries(fmha PUBLIC CUDA::cudart)
set_target_properties(fmha PROPERTIES POSITION_INDEPENDENT_CODE ON)

# libfmha_c.so: the C entry points (include/fmha/c_api.h) for bindings such as bench/bench_fwd.py (ctypes).
add_library(fmha_c SHARED ${PROJECT_SOURCE_DIR}/src/api/c_api.cpp)
add_library(fmha::fmha_c ALIAS fmha_c)
target_include_directories(fmha_c INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:include> PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(fmha_c PRIVATE fmha)
set_target_properties(fmha_c PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
target_compile_options(fmha PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)

if(FMHA_KERNEL_SOURCES)
  enable_language(CUDA)
  # Kernels shared by the families, outside the per-(op, dtype, head dim) units: the split-KV combine.
  target_sources(fmha PRIVATE ${PROJECT_SOURCE_DIR}/src/kernels/device/combine.cu)
  # src/api/combine.cpp: the combine kernel is linked (a build without kernels returns kNotBuilt there).
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/api/combine.cpp PROPERTIES COMPILE_DEFINITIONS FMHA_WITH_KERNELS=1)
  if(NOT EXISTS ${CUTLASS_DIR}/include/cutlass/cutlass.h)
    message(FATAL_ERROR "CUTLASS_DIR=${CUTLASS_DIR} holds no include/cutlass/cutlass.h: run scripts/setup.sh, which "
                        "installs nvidia-cutlass==4.2.0.0 there, or pass -DCUTLASS_DIR=<root of the C++ tree>")
  endif()
  set_target_properties(fmha PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_include_directories(fmha PRIVATE ${CUTLASS_DIR}/include ${CUTLASS_DIR}/tools/util/include)
  target_compile_definitions(fmha PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:NDEBUG>)
  target_compile_options(fmha PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:
      -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr --use_fast_math -O3
      -Xcompiler=-fno-strict-aliasing -DCUTLASS_ENABLE_GDC_FOR_SM90=0>)
  if(FMHA_VERBOSE_PTXAS)
    target_compile_options(fmha PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
  endif()
endif()
list(LENGTH FMHA_KERNEL_SOURCES n_kernels)
message(STATUS "fmha: kernel set '${FMHA_KERNEL_SET}': ${n_kernels} kernel translation unit(s); CUTLASS_DIR=${CUTLASS_DIR}")
