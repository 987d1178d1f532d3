# The PyTorch extension (src/torch/ops.cpp → libfmha_torch.so, the operators torch.ops.fmha.*) and the Python package
# python/fmha, staged into ${PROJECT_BINARY_DIR}/python/fmha so that PYTHONPATH=<build>/python imports it from the
# build tree; scikit-build-core (pyproject.toml) installs the same two into a wheel.
#
# FMHA_TORCH: AUTO (build it when torch is found), ON (required) or OFF. torch is found at FMHA_TORCH_DIR (the torch
# package folder, holding include/ and lib/; scripts/setup.sh installs torch==2.11.0 into .deps/torch and passes
# .deps/torch/torch), else through `import torch` of the Python interpreter. The extension uses only torch's C++
# library (TORCH_LIBRARY, no Python C API), so one build loads into every Python that runs the same torch.
set(FMHA_TORCH "AUTO" CACHE STRING "Build the PyTorch extension: AUTO | ON | OFF")
set_property(CACHE FMHA_TORCH PROPERTY STRINGS AUTO ON OFF)
set(FMHA_TORCH_DIR "" CACHE PATH "torch package folder (holds include/ and lib/); empty = ask `python3 -c 'import torch'`")

if(NOT FMHA_TORCH STREQUAL "OFF")
  set(torch_dir "${FMHA_TORCH_DIR}")
  if(NOT torch_dir)
    find_package(Python3 COMPONENTS Interpreter QUIET)
    if(Python3_Interpreter_FOUND)
      execute_process(COMMAND ${Python3_EXECUTABLE} -c "import os, torch; print(os.path.dirname(torch.__file__))"
                      OUTPUT_VARIABLE torch_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    endif()
  endif()
  if(torch_dir AND EXISTS "${torch_dir}/include/torch/library.h" AND EXISTS "${torch_dir}/lib/libc10_cuda.so")
    message(STATUS "fmha: PyTorch extension against ${torch_dir}")
    # What the Python tests put on PYTHONPATH: the staged package and the folder holding torch.
    get_filename_component(torch_parent "${torch_dir}" DIRECTORY)
    set(FMHA_PYTHONPATH "${PROJECT_BINARY_DIR}/python:${torch_parent}")
    add_library(fmha_torch MODULE ${PROJECT_SOURCE_DIR}/src/torch/ops.cpp)
    target_include_directories(fmha_torch SYSTEM PRIVATE ${torch_dir}/include
                               ${torch_dir}/include/torch/csrc/api/include)
    # torch's libraries are already loaded (import torch) when the extension loads: no rpath to them.
    target_link_libraries(fmha_torch PRIVATE fmha ${torch_dir}/lib/libc10.so ${torch_dir}/lib/libc10_cuda.so
                          ${torch_dir}/lib/libtorch_cpu.so ${torch_dir}/lib/libtorch.so)
    # torch 2.x wheels use the C++11 ABI of libstdc++.
    target_compile_definitions(fmha_torch PRIVATE _GLIBCXX_USE_CXX11_ABI=1)
    target_compile_options(fmha_torch PRIVATE -Wall -Wextra -Wno-unused-parameter)
    set(fmha_py_dir ${PROJECT_BINARY_DIR}/python/fmha)
    set_target_properties(fmha_torch PROPERTIES PREFIX "lib" LIBRARY_OUTPUT_DIRECTORY ${fmha_py_dir})
    file(GLOB fmha_py_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/fmha/*.py)
    set(staged "")
    foreach(src ${fmha_py_sources})
      get_filename_component(name ${src} NAME)
      add_custom_command(OUTPUT ${fmha_py_dir}/${name} COMMAND ${CMAKE_COMMAND} -E copy ${src} ${fmha_py_dir}/${name}
                         DEPENDS ${src} COMMENT "fmha: staging python/fmha/${name}")
      list(APPEND staged ${fmha_py_dir}/${name})
    endforeach()
    add_custom_target(fmha_python ALL DEPENDS ${staged})
    if(SKBUILD)
      install(TARGETS fmha_torch LIBRARY DESTINATION fmha)
    endif()
  elseif(FMHA_TORCH STREQUAL "ON")
    message(FATAL_ERROR "FMHA_TORCH=ON: no torch with C++ headers found (FMHA_TORCH_DIR='${FMHA_TORCH_DIR}', "
                        "python3 -c 'import torch' gave '${torch_dir}'); install torch==2.11.0 or set FMHA_TORCH_DIR")
  else()
    message(STATUS "fmha: no torch found: the PyTorch extension is not built (FMHA_TORCH=AUTO)")
  endif()
endif()
