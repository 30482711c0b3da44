# Format conversion: PyTorch (.pt zip + restricted unpickler) and safetensors.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/convert/bytes.cc
  ${RCKPT_SRC}/convert/crc32.cc
  ${RCKPT_SRC}/convert/zip.cc
  ${RCKPT_SRC}/convert/pickle_reader.cc
  ${RCKPT_SRC}/convert/import_common.cc
  ${RCKPT_SRC}/convert/numpy_pickle.cc
  ${RCKPT_SRC}/convert/pytorch_import.cc
)
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/convert/pickle_writer.cc
  ${RCKPT_SRC}/convert/pytorch_export.cc
  ${RCKPT_SRC}/convert/pytorch_layout.cc
)
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/convert/json.cc
  ${RCKPT_SRC}/convert/tree_json.cc
  ${RCKPT_SRC}/convert/safetensors.cc
  ${RCKPT_SRC}/convert/convert_any.cc
  ${RCKPT_SRC}/convert/convert.cc
  ${RCKPT_SRC}/convert/load_any.cc
  ${RCKPT_SRC}/convert/bundle.cc
  ${RCKPT_SRC}/convert/dcp_import.cc
)

# The CRC-32 folding kernel built for PCLMULQDQ in its own file, selected at
# run time (crc32.cc), so the library still runs on any x86-64 CPU.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND
   CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_sources(rckpt PRIVATE ${RCKPT_SRC}/convert/crc32_pclmul.cc)
  set_source_files_properties(${RCKPT_SRC}/convert/crc32_pclmul.cc PROPERTIES
                              COMPILE_OPTIONS "-mpclmul;-msse4.1")
  set_source_files_properties(${RCKPT_SRC}/convert/crc32.cc PROPERTIES
                              COMPILE_DEFINITIONS RCKPT_HAVE_CRC32_PCLMUL=1)
endif()
