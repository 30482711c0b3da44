target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/util/json_writer.cc
  ${RCKPT_SRC}/tools/inspect.cc
  ${RCKPT_SRC}/tools/diff.cc
  ${RCKPT_SRC}/tools/flag_terms.cc)
