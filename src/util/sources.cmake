target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/util/thread_pool.cc)
