# Generates the FlatBuffers C++ header from schema/checkpoint.fbs at build
# time (generated code is never committed) and exposes it as rckpt_schema.
set(RCKPT_SCHEMA ${PROJECT_SOURCE_DIR}/schema/checkpoint.fbs)
set(RCKPT_SCHEMA_DIR ${PROJECT_BINARY_DIR}/generated/rckpt)
set(RCKPT_SCHEMA_HEADER ${RCKPT_SCHEMA_DIR}/checkpoint_generated.h)
add_custom_command(
  OUTPUT ${RCKPT_SCHEMA_HEADER}
  COMMAND flatbuffers::flatc --cpp --scoped-enums -o ${RCKPT_SCHEMA_DIR} ${RCKPT_SCHEMA}
  DEPENDS ${RCKPT_SCHEMA} flatbuffers::flatc
  COMMENT "flatc: generating checkpoint_generated.h"
  VERBATIM)
add_custom_target(rckpt_schema_gen DEPENDS ${RCKPT_SCHEMA_HEADER})
add_library(rckpt_schema INTERFACE)
add_dependencies(rckpt_schema rckpt_schema_gen)
target_include_directories(rckpt_schema INTERFACE $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>)
target_link_libraries(rckpt_schema INTERFACE flatbuffers::flatbuffers)
