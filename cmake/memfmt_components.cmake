# Optional components. Each is built only when asked for (AUTO/ON) and found; configure says which.
# The core target never depends on any of them.

function(_memfmt_component_wanted var name)
  string(TOUPPER "${${var}}" _v)
  if(_v STREQUAL "OFF" OR _v STREQUAL "NO" OR _v STREQUAL "FALSE" OR _v STREQUAL "0")
    set(_memfmt_want_${name} OFF PARENT_SCOPE)
  elseif(_v STREQUAL "ON" OR _v STREQUAL "YES" OR _v STREQUAL "TRUE" OR _v STREQUAL "1")
    set(_memfmt_want_${name} REQUIRED PARENT_SCOPE)
  else()
    set(_memfmt_want_${name} AUTO PARENT_SCOPE)
  endif()
endfunction()

set(MEMFMT_HAVE_CUDA OFF)
set(MEMFMT_HAVE_CUDNN OFF)
set(MEMFMT_HAVE_ONEDNN OFF)

# ---- CUDA: memfmt::cuda ----
_memfmt_component_wanted(MEMFMT_ENABLE_CUDA cuda)
_memfmt_component_wanted(MEMFMT_ENABLE_CUDNN cudnn)
if(NOT _memfmt_want_cuda STREQUAL "OFF" OR NOT _memfmt_want_cudnn STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    # Decided before enable_language, which would otherwise fill in nvcc's own default. One
    # architecture keeps nvcc fast on small machines: Turing machine code plus its PTX, which the
    # driver compiles for any newer GPU (Hopper included). Give CMAKE_CUDA_ARCHITECTURES (90, or
    # native on a GPU machine, as scripts/bench.sh does) for machine code of the GPU at hand.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES 75 CACHE STRING "CUDA architectures")
    endif()
    enable_language(CUDA)
    add_library(memfmt_cuda INTERFACE)
    add_library(memfmt::cuda ALIAS memfmt_cuda)
    set_target_properties(memfmt_cuda PROPERTIES EXPORT_NAME cuda)
    target_link_libraries(memfmt_cuda INTERFACE memfmt CUDA::cudart)
    # std::array and other constexpr host functions are used in MEMFMT_HOST_DEVICE code.
    target_compile_options(memfmt_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
    set(MEMFMT_HAVE_CUDA ON)
    message(STATUS "memfmt: memfmt::cuda enabled (CUDA ${CUDAToolkit_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(_memfmt_want_cuda STREQUAL "REQUIRED")
    message(FATAL_ERROR "memfmt: MEMFMT_ENABLE_CUDA=ON but no CUDA compiler/toolkit was found")
  else()
    message(STATUS "memfmt: memfmt::cuda disabled (no CUDA toolkit found)")
  endif()
endif()

# ---- cuDNN 9: memfmt::cudnn ----
if(NOT _memfmt_want_cudnn STREQUAL "OFF")
  set(_cudnn_hint "")
  if(CUDAToolkit_FOUND)
    set(_cudnn_hint ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_DIR})
  endif()
  find_path(MEMFMT_CUDNN_INCLUDE_DIR cudnn.h HINTS ${_cudnn_hint} /usr/local/cuda/include)
  find_library(MEMFMT_CUDNN_LIBRARY cudnn HINTS ${_cudnn_hint} /usr/local/cuda/lib64)
  # 9.8 or newer: plans are built for a device-properties descriptor (backends/cudnn/plan.hpp).
  set(_cudnn_version 0)
  if(MEMFMT_CUDNN_INCLUDE_DIR AND EXISTS "${MEMFMT_CUDNN_INCLUDE_DIR}/cudnn_version.h")
    file(STRINGS "${MEMFMT_CUDNN_INCLUDE_DIR}/cudnn_version.h" _l REGEX "^#define CUDNN_(MAJOR|MINOR) [0-9]+")
    string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*" "\\1" _cudnn_major "${_l}")
    string(REGEX REPLACE ".*CUDNN_MINOR ([0-9]+).*" "\\1" _cudnn_minor "${_l}")
    set(_cudnn_version "${_cudnn_major}.${_cudnn_minor}")
  endif()
  if(MEMFMT_HAVE_CUDA AND MEMFMT_CUDNN_LIBRARY AND _cudnn_version VERSION_GREATER_EQUAL 9.8)
    add_library(memfmt_cudnn INTERFACE)
    add_library(memfmt::cudnn ALIAS memfmt_cudnn)
    set_target_properties(memfmt_cudnn PROPERTIES EXPORT_NAME cudnn)
    target_include_directories(memfmt_cudnn INTERFACE "$<BUILD_INTERFACE:${MEMFMT_CUDNN_INCLUDE_DIR}>")
    target_link_libraries(memfmt_cudnn INTERFACE memfmt_cuda "$<BUILD_INTERFACE:${MEMFMT_CUDNN_LIBRARY}>"
                                                 "$<INSTALL_INTERFACE:cudnn>")
    set(MEMFMT_HAVE_CUDNN ON)
    message(STATUS "memfmt: memfmt::cudnn enabled (cuDNN ${_cudnn_version}, ${MEMFMT_CUDNN_LIBRARY})")
  elseif(_memfmt_want_cudnn STREQUAL "REQUIRED")
    message(FATAL_ERROR "memfmt: MEMFMT_ENABLE_CUDNN=ON but cuDNN >= 9.8 (with CUDA) was not found "
                        "(headers: ${_cudnn_version})")
  else()
    message(STATUS "memfmt: memfmt::cudnn disabled (cuDNN >= 9.8 with CUDA not found; headers: ${_cudnn_version})")
  endif()
endif()

# ---- oneDNN: memfmt::onednn ----
_memfmt_component_wanted(MEMFMT_ENABLE_ONEDNN onednn)
if(NOT _memfmt_want_onednn STREQUAL "OFF")
  # Debian's dnnl-config.cmake requires OpenCL (fatally); look for it first so that a missing
  # OpenCL turns the component off instead of failing the configure.
  find_package(OpenCL QUIET)
  find_file(_memfmt_dnnl_config dnnl-config.cmake PATH_SUFFIXES lib/x86_64-linux-gnu/cmake/dnnl lib/cmake/dnnl)
  if(OpenCL_FOUND OR NOT _memfmt_dnnl_config)
    find_package(dnnl CONFIG QUIET)
  endif()
  if(dnnl_FOUND)
    add_library(memfmt_onednn INTERFACE)
    add_library(memfmt::onednn ALIAS memfmt_onednn)
    set_target_properties(memfmt_onednn PROPERTIES EXPORT_NAME onednn)
    target_link_libraries(memfmt_onednn INTERFACE memfmt DNNL::dnnl)
    set(MEMFMT_HAVE_ONEDNN ON)
    message(STATUS "memfmt: memfmt::onednn enabled (oneDNN ${dnnl_VERSION})")
  elseif(_memfmt_want_onednn STREQUAL "REQUIRED")
    message(FATAL_ERROR "memfmt: MEMFMT_ENABLE_ONEDNN=ON but oneDNN (package dnnl, Debian libdnnl-dev) was not found")
  else()
    message(STATUS "memfmt: memfmt::onednn disabled (oneDNN not found; Debian: libdnnl-dev ocl-icd-opencl-dev)")
  endif()
endif()

# ---- components that read and write JSON with nlohmann-json (Debian nlohmann-json3-dev) ----
# _memfmt_json_component(<name> <ENABLE var> <HAVE var> <what>) defines memfmt::<name> when the
# library is found (or fails the configure when <ENABLE var> is ON), as the other components do.
macro(_memfmt_json_component name enable_var have_var what)
  set(${have_var} OFF)
  _memfmt_component_wanted(${enable_var} ${name})
  if(NOT _memfmt_want_${name} STREQUAL "OFF")
    find_package(nlohmann_json 3 QUIET)
    if(nlohmann_json_FOUND)
      add_library(memfmt_${name} INTERFACE)
      add_library(memfmt::${name} ALIAS memfmt_${name})
      set_target_properties(memfmt_${name} PROPERTIES EXPORT_NAME ${name})
      target_link_libraries(memfmt_${name} INTERFACE memfmt nlohmann_json::nlohmann_json)
      set(${have_var} ON)
      message(STATUS "memfmt: memfmt::${name} enabled (${what}; nlohmann_json ${nlohmann_json_VERSION})")
    elseif(_memfmt_want_${name} STREQUAL "REQUIRED")
      message(FATAL_ERROR "memfmt: ${enable_var}=ON but nlohmann_json 3 (Debian nlohmann-json3-dev) was not found")
    else()
      message(STATUS "memfmt: memfmt::${name} disabled (nlohmann_json 3 not found; Debian: nlohmann-json3-dev)")
    endif()
  endif()
endmacro()

# io/safetensors.hpp: the JSON header of safetensors parameter files.
_memfmt_json_component(safetensors MEMFMT_ENABLE_SAFETENSORS MEMFMT_HAVE_SAFETENSORS "safetensors parameter files")

# ---- ONNX models: memfmt::onnx ----
# onnx/import.hpp reads models with the ONNX project's own C++ library and protobuf types (Debian
# libonnx-dev, libprotobuf-dev). Debian's ONNXTargets.cmake names protobuf::libprotobuf, so Protobuf
# is looked for first; without it the ONNX config would fail the configure instead of switching off.
set(MEMFMT_ENABLE_ONNX AUTO CACHE STRING "memfmt::onnx (ONNX model import, needs libonnx-dev): AUTO, ON or OFF")
set(MEMFMT_HAVE_ONNX OFF)
_memfmt_component_wanted(MEMFMT_ENABLE_ONNX onnx)
if(NOT _memfmt_want_onnx STREQUAL "OFF")
  find_package(Protobuf QUIET)
  if(Protobuf_FOUND)
    find_package(ONNX CONFIG QUIET)
  endif()
  if(Protobuf_FOUND AND ONNX_FOUND AND TARGET onnx)
    add_library(memfmt_onnx INTERFACE)
    add_library(memfmt::onnx ALIAS memfmt_onnx)
    set_target_properties(memfmt_onnx PROPERTIES EXPORT_NAME onnx)
    target_link_libraries(memfmt_onnx INTERFACE memfmt onnx onnx_proto protobuf::libprotobuf)
    set(MEMFMT_HAVE_ONNX ON)
    message(STATUS "memfmt: memfmt::onnx enabled (ONNX ${ONNX_VERSION}, protobuf ${Protobuf_VERSION})")
  elseif(_memfmt_want_onnx STREQUAL "REQUIRED")
    message(FATAL_ERROR "memfmt: MEMFMT_ENABLE_ONNX=ON but ONNX (Debian libonnx-dev libprotobuf-dev) was not found")
  else()
    message(STATUS "memfmt: memfmt::onnx disabled (ONNX not found; Debian: libonnx-dev libprotobuf-dev)")
  endif()
endif()

# io/network_json.hpp and io/plan_json.hpp: network and plan files.
_memfmt_json_component(graph_io MEMFMT_ENABLE_GRAPH_IO MEMFMT_HAVE_GRAPH_IO "network and plan files")
