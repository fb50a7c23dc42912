# The executor, the trainer and calibrate are the heaviest templates to compile, and many translation
# units (tests, the CLI, benchmarks, examples) use them on the same backend. Each backend's are
# instantiated once here: a target that calls memfmt_use_instances(target backend...) links
# memfmt_instances_<backend> and gets extern_<backend>.hpp (their extern declarations) included first
# in each of its C++ files, so it does not instantiate them again. The executor's and trainer's
# constructors, which bind every layer, are defined out of the class bodies so that the extern
# declarations cover them. Each library is built only where a target links it. Project-internal: an
# installed memfmt has no such libraries.

# `calibrate_header` is the one with the backend's calibration_key (its timing cache's key), which
# the calibration instantiated here must see as every caller would.
function(_memfmt_instances backend header calibrate_header type lib)
  set(dir "${PROJECT_BINARY_DIR}/instances/${backend}")
  # The extern declarations through the public macros (runtime/instances.hpp), so that a user's build
  # that copies this arrangement compiles what memfmt's does.
  set(includes "")
  foreach(h IN ITEMS ${header} ${calibrate_header} memfmt/runtime/instances.hpp)
    string(APPEND includes "#include <${h}>\n")
  endforeach()
  file(CONFIGURE OUTPUT "${dir}/extern_${backend}.hpp" @ONLY CONTENT
       "#pragma once\n${includes}\nMEMFMT_EXTERN_RUNTIME(${type})\n")
  # One file per template, built side by side: the trainer takes about half of the three's time.
  set(sources "")
  foreach(part IN ITEMS EXECUTOR TRAINER CALIBRATE)
    string(TOLOWER "${part}" name)
    file(CONFIGURE OUTPUT "${dir}/${backend}_${name}.cpp" @ONLY CONTENT
         "#include \"extern_${backend}.hpp\"\n\nMEMFMT_INSTANTIATE_${part}(${type})\n")
    list(APPEND sources "${dir}/${backend}_${name}.cpp")
  endforeach()
  add_library(memfmt_instances_${backend} STATIC EXCLUDE_FROM_ALL ${sources})
  target_link_libraries(memfmt_instances_${backend} PUBLIC ${lib} PRIVATE memfmt_project_flags)
  target_include_directories(memfmt_instances_${backend} PUBLIC "${dir}")
  target_compile_options(memfmt_instances_${backend} INTERFACE
    "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include extern_${backend}.hpp>")
endfunction()

# After the backends' components are found (memfmt::onednn, memfmt::cudnn where they are).
function(memfmt_define_instances)
  _memfmt_instances(reference memfmt/backends/reference/backend.hpp memfmt/runtime/calibrate.hpp
                    memfmt::reference::backend memfmt::memfmt)
  if(TARGET memfmt::onednn)
    _memfmt_instances(onednn memfmt/backends/onednn/backend.hpp memfmt/runtime/onednn/calibrate.hpp
                      memfmt::onednn::backend memfmt::onednn)
  endif()
  if(TARGET memfmt::cudnn)
    _memfmt_instances(cudnn memfmt/backends/cudnn/backend.hpp memfmt/runtime/cudnn/calibrate.hpp
                      memfmt::cudnn::backend memfmt::cudnn)
  endif()
endfunction()

# memfmt_use_instances(target backend...): the target takes the executor, trainer and calibrate of each named
# backend (reference, onednn, cudnn) from its instance library where that backend is built.
function(memfmt_use_instances target)
  foreach(backend IN LISTS ARGN)
    if(TARGET memfmt_instances_${backend})
      target_link_libraries(${target} PRIVATE memfmt_instances_${backend})
    endif()
  endforeach()
endfunction()
