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

# rckpt_check_torch_build: an installed rckpt::torch links only with the
# libtorch it was compiled against, version and ABI flag.
function(expect_build built_version built_abi version torch_flags want)
  rckpt_check_torch_build("${built_version}" "${built_abi}" "/built/Torch" "${version}"
                          "${torch_flags}" "/found/Torch" error)
  if(want STREQUAL "ok" AND NOT error STREQUAL "")
    message(FATAL_ERROR "built ${built_version}/${built_abi}, found ${version} '${torch_flags}': unexpected error: ${error}")
  elseif(NOT want STREQUAL "ok" AND NOT error MATCHES "${want}")
    message(FATAL_ERROR "built ${built_version}/${built_abi}, found ${version} '${torch_flags}': expected an error matching '${want}', got '${error}'")
  endif()
endfunction()

expect_build(2.7.1 1 2.7.1 "" ok)
expect_build(2.6.0 0 2.6.0 "-D_GLIBCXX_USE_CXX11_ABI=0" ok)
expect_build(2.7.1 1 2.8.0 ""
  "rckpt::torch was built against libtorch 2.7.1 \\(_GLIBCXX_USE_CXX11_ABI=1, /built/Torch\\), but this project found libtorch 2.8.0 \\(_GLIBCXX_USE_CXX11_ABI=1, /found/Torch\\)")
expect_build(2.7.1 1 2.7.2 "" "found libtorch 2.7.2")
expect_build(2.6.0 1 2.6.0 "-D_GLIBCXX_USE_CXX11_ABI=0" "found libtorch 2.6.0 \\(_GLIBCXX_USE_CXX11_ABI=0")
message(STATUS "abi_check: a libtorch of another version or ABI flag than the adapter's is refused, naming both")
