# Kokkos 3.4 + CUDA 13 workarounds, on the project side (see README.md here).
# Applied only when the Kokkos found is 3.x with CUDA >= 13; a newer Kokkos
# skips this file's effects entirely, and then the folder can be deleted.
if(Kokkos_VERSION VERSION_LESS 4 AND Kokkos_ENABLE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  if(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 13)
    message(STATUS "Kokkos ${Kokkos_VERSION} with CUDA ${CUDAToolkit_VERSION}: applying cmake/kokkos3-cuda13 workarounds")
    # 1: old cudaMemPrefetchAsync signature; 2: float-backed half_t
    add_compile_options(-include ${CMAKE_CURRENT_LIST_DIR}/cuda13_compat.h
                        -DKOKKOS_ARCH_MAXWELL50)
    # 3: the compiler itself must be the sm_90 launcher (set before project()).
    if(NOT CMAKE_CXX_COMPILER MATCHES "nvcc-sm90$")
      message(FATAL_ERROR "Kokkos 3.x with CUDA >= 13 needs CMAKE_CXX_COMPILER=<kokkos prefix>/bin/nvcc-sm90 (scripts/setup --cuda does this)")
    endif()
  endif()
endif()
