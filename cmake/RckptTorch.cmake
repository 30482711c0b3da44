# libtorch for rckpt::torch (torch/, docs/CPP.md): used by torch/CMakeLists.txt
# and, installed beside rckptConfig.cmake, by find_package(rckpt) when the
# adapter is installed.
include_guard(GLOBAL)
include(CheckCXXSourceCompiles)

# rckpt_cxx11_abi(<var>): libstdc++'s _GLIBCXX_USE_CXX11_ABI with the flags
# this project compiles with (CMAKE_CXX_FLAGS): "1", "0", or "" for another
# standard library (no such ABI switch).
function(rckpt_cxx11_abi var)
  check_cxx_source_compiles("#include <string>
#ifndef __GLIBCXX__
#error not libstdc++
#endif
int main() { return 0; }" RCKPT_HAVE_LIBSTDCXX)
  if(NOT RCKPT_HAVE_LIBSTDCXX)
    set(${var} "" PARENT_SCOPE)
    return()
  endif()
  check_cxx_source_compiles("#include <string>
#if !_GLIBCXX_USE_CXX11_ABI
#error the pre-C++11 ABI
#endif
int main() { return 0; }" RCKPT_LIBSTDCXX_CXX11_ABI)
  if(RCKPT_LIBSTDCXX_CXX11_ABI)
    set(${var} 1 PARENT_SCOPE)
  else()
    set(${var} 0 PARENT_SCOPE)
  endif()
endfunction()

# rckpt_check_torch_abi(<rckpt_abi> <torch_cxx_flags> <error_var>): sets
# <error_var> to why code built with libtorch's flags cannot call rckpt, or
# to "" when it can. libtorch says its ABI in TORCH_CXX_FLAGS
# (-D_GLIBCXX_USE_CXX11_ABI=0 for the old ABI; nothing since torch 2.7 built
# every wheel with the C++11 ABI).
function(rckpt_check_torch_abi rckpt_abi torch_flags error_var)
  rckpt_torch_abi("${torch_flags}" torch_abi)
  if(rckpt_abi STREQUAL "" OR rckpt_abi STREQUAL torch_abi)
    set(${error_var} "" PARENT_SCOPE)
    return()
  endif()
  string(CONCAT message
    "libtorch was built with _GLIBCXX_USE_CXX11_ABI=${torch_abi} but rckpt with "
    "_GLIBCXX_USE_CXX11_ABI=${rckpt_abi}: std::string and std::vector differ between the two, "
    "so code built for one cannot call the other. Build rckpt with "
    "-DCMAKE_CXX_FLAGS=-D_GLIBCXX_USE_CXX11_ABI=${torch_abi}, or use a libtorch built with the "
    "C++11 ABI (every torch wheel from 2.7 on; the cxx11-abi libtorch archives before)")
  set(${error_var} "${message}" PARENT_SCOPE)
endfunction()

# rckpt_torch_abi(<torch_cxx_flags> <var>): the _GLIBCXX_USE_CXX11_ABI a
# libtorch says in its TORCH_CXX_FLAGS (1 when it says nothing: every wheel
# since torch 2.7).
function(rckpt_torch_abi torch_flags var)
  set(abi 1)
  if(torch_flags MATCHES "_GLIBCXX_USE_CXX11_ABI=([01])")
    set(abi ${CMAKE_MATCH_1})
  endif()
  set(${var} ${abi} PARENT_SCOPE)
endfunction()

# rckpt_check_torch_build(<built_version> <built_abi> <built_dir> <version>
#                         <torch_cxx_flags> <dir> <error_var>): sets
# <error_var> to why an installed rckpt::torch, compiled against libtorch
# <built_version> of C++ ABI <built_abi> (in <built_dir>), cannot be linked
# with the libtorch found (<version>, <torch_cxx_flags>, in <dir>), or to ""
# when it is the same libtorch. libtorch's C++ API makes no binary promise
# from one version to the next (the adapter inlines its option structs,
# OrderedDict and Generator), so the version must be the same to the patch
# level, and the ABI flag too (libtorch before 2.7 came in both ABIs).
function(rckpt_check_torch_build built_version built_abi built_dir version torch_flags dir
         error_var)
  rckpt_torch_abi("${torch_flags}" abi)
  if(version VERSION_EQUAL built_version AND abi STREQUAL built_abi)
    set(${error_var} "" PARENT_SCOPE)
    return()
  endif()
  string(CONCAT message
    "rckpt::torch was built against libtorch ${built_version} (_GLIBCXX_USE_CXX11_ABI=${built_abi}, "
    "${built_dir}), but this project found libtorch ${version} (_GLIBCXX_USE_CXX11_ABI=${abi}, "
    "${dir}). libtorch's C++ API makes no binary promise from one version to the next: build "
    "rckpt::torch again against this libtorch (cmake -S <rckpt>/torch, docs/CPP.md), or point "
    "CMAKE_PREFIX_PATH (or Torch_DIR and Caffe2_DIR) at libtorch ${built_version}")
  set(${error_var} "${message}" PARENT_SCOPE)
endfunction()

# rckpt_find_torch(<found_var> <rckpt_abi> [REQUIRED]): find_package(Torch),
# then the checks rckpt::torch needs: libtorch 2.3 or newer, and the C++ ABI
# of rckpt (<rckpt_abi>, as rckpt_cxx11_abi gives it). Sets <found_var> and
# RCKPT_TORCH_NOT_FOUND_MESSAGE (why not); REQUIRED makes a failure fatal.
#
# A CUDA build of libtorch (the Linux wheels on PyPI are) makes
# find_package(Torch) set the CUDA toolkit up for its caller: it looks for
# nvcc, fails without one, enables the CUDA language and checks nvcc against
# the CMake it runs under (CMake 3.25 and nvcc 13 fail on C++20: "requires the
# language dialect CUDA20"). Code that only calls libtorch, as rckpt::torch
# does, needs none of it: libtorch's CUDA libraries come with it. So unless
# RCKPT_TORCH_CUDA_TOOLKIT is ON, rckpt defines the target that tells
# libtorch's configuration the toolkit is set up already, torch::cudart, with
# the include directories of the toolkit FindCUDAToolkit finds (which needs
# no CUDA language), so that <c10/cuda/...> headers compile in a project that
# found rckpt first; it links nothing: libtorch_cuda brings the wheel's own
# CUDA runtime, and a system toolkit's libcudart.so (and the libraries beside
# it, found through its directory) need not match the wheel's. Empty where
# there is no toolkit. A project that compiles CUDA with libtorch's
# settings calls find_package(Torch) before find_package(rckpt), or sets
# RCKPT_TORCH_CUDA_TOOLKIT=ON.
macro(rckpt_find_torch found_var rckpt_abi)
  set(${found_var} FALSE)
  set(RCKPT_TORCH_NOT_FOUND_MESSAGE "")
  if(NOT TARGET torch::cudart AND NOT RCKPT_TORCH_CUDA_TOOLKIT)
    # libtorch's config (Caffe2's public/cuda.cmake) sets the toolkit up only
    # when this target does not exist yet.
    find_package(CUDAToolkit QUIET)
    if(CMAKE_FIND_PACKAGE_TARGETS_GLOBAL)
      add_library(torch::cudart INTERFACE IMPORTED GLOBAL)
    else()
      add_library(torch::cudart INTERFACE IMPORTED)
    endif()
    if(CUDAToolkit_FOUND)
      set_property(TARGET torch::cudart PROPERTY INTERFACE_INCLUDE_DIRECTORIES
                   ${CUDAToolkit_INCLUDE_DIRS})
    endif()
  endif()
  find_package(Torch CONFIG QUIET)
  if(NOT Torch_FOUND)
    string(CONCAT RCKPT_TORCH_NOT_FOUND_MESSAGE
      "find_package(Torch) found no libtorch: add the directory that "
      "python -c 'import torch; print(torch.utils.cmake_prefix_path)' prints to "
      "CMAKE_PREFIX_PATH, or set Torch_DIR and Caffe2_DIR (docs/CPP.md)")
  elseif(Torch_VERSION VERSION_LESS 2.3)
    string(CONCAT RCKPT_TORCH_NOT_FOUND_MESSAGE
      "rckpt::torch needs libtorch 2.3 or newer; find_package(Torch) found ${Torch_VERSION} in "
      "${Torch_DIR}. Point Torch_DIR and Caffe2_DIR at a newer one (a torch wheel's "
      "share/cmake/Torch and share/cmake/Caffe2), docs/CPP.md")
  else()
    rckpt_check_torch_abi("${rckpt_abi}" "${TORCH_CXX_FLAGS}" _rckpt_abi_error)
    if(_rckpt_abi_error)
      set(RCKPT_TORCH_NOT_FOUND_MESSAGE "${_rckpt_abi_error} (libtorch: ${Torch_DIR})")
    else()
      set(${found_var} TRUE)
    endif()
    unset(_rckpt_abi_error)
  endif()
  if(NOT ${found_var} AND ${ARGC} GREATER 2 AND "${ARGV2}" STREQUAL "REQUIRED")
    message(FATAL_ERROR "rckpt::torch: ${RCKPT_TORCH_NOT_FOUND_MESSAGE}")
  endif()
endmacro()
