# Small helpers every layer may use: host memory, thread pool, UTF-8, JSON
# writer, hex digits, human-readable byte counts.
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/util/host_memory.cc
  ${RCKPT_SRC}/util/hex.cc
  ${RCKPT_SRC}/util/human_bytes.cc
  ${RCKPT_SRC}/util/json_writer.cc
  ${RCKPT_SRC}/util/node.cc
  ${RCKPT_SRC}/util/crc32c.cc
  ${RCKPT_SRC}/util/utf8.cc
  ${RCKPT_SRC}/util/thread_pool.cc)
