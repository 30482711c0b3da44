# Format conversion: PyTorch (.pt zip + restricted unpickler) and safetensors.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/convert/zip.cc
  ${RCKPT_SRC}/convert/pickle_reader.cc
  ${RCKPT_SRC}/convert/import_common.cc
  ${RCKPT_SRC}/convert/pytorch_import.cc
)
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/convert/pickle_writer.cc
  ${RCKPT_SRC}/convert/pytorch_export.cc
)
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/convert/json.cc
  ${RCKPT_SRC}/convert/tree_json.cc
  ${RCKPT_SRC}/convert/safetensors.cc
  ${RCKPT_SRC}/convert/convert_any.cc
  ${RCKPT_SRC}/convert/dcp_import.cc
)
