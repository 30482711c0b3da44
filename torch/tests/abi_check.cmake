# cmake -P torch/tests/abi_check.cmake: rckpt_check_torch_abi refuses a
# libtorch whose C++ ABI is not rckpt's and says how to fix it.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/RckptTorch.cmake)

function(expect rckpt_abi torch_flags want)
  rckpt_check_torch_abi("${rckpt_abi}" "${torch_flags}" error)
  if(want STREQUAL "ok" AND NOT error STREQUAL "")
    message(FATAL_ERROR "rckpt ABI '${rckpt_abi}', TORCH_CXX_FLAGS '${torch_flags}': unexpected error: ${error}")
  elseif(NOT want STREQUAL "ok" AND NOT error MATCHES "${want}")
    message(FATAL_ERROR "rckpt ABI '${rckpt_abi}', TORCH_CXX_FLAGS '${torch_flags}': expected an error matching '${want}', got '${error}'")
  endif()
endfunction()

expect(1 "" ok)                                    # torch >= 2.7: no flag, the C++11 ABI
expect(0 "-D_GLIBCXX_USE_CXX11_ABI=0" ok)
expect("" "-D_GLIBCXX_USE_CXX11_ABI=0" ok)         # libc++: no such switch
expect(1 "-D_GLIBCXX_USE_CXX11_ABI=0"
  "libtorch was built with _GLIBCXX_USE_CXX11_ABI=0 but rckpt with _GLIBCXX_USE_CXX11_ABI=1.*Build rckpt with -DCMAKE_CXX_FLAGS=-D_GLIBCXX_USE_CXX11_ABI=0")
expect(0 "" "libtorch was built with _GLIBCXX_USE_CXX11_ABI=1 but rckpt with _GLIBCXX_USE_CXX11_ABI=0")
message(STATUS "abi_check: a libtorch of another C++ ABI than rckpt's is refused with the fix")
