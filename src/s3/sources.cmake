# Object storage: the S3 file system over libcurl, OpenSSL and pugixml
# (included from src/CMakeLists.txt when RCKPT_HAVE_S3).
target_sources(rckpt PRIVATE
  ${RCKPT_SRC}/s3/aws_config.cc
  ${RCKPT_SRC}/s3/client.cc
  ${RCKPT_SRC}/s3/clock_skew.cc
  ${RCKPT_SRC}/s3/credentials.cc
  ${RCKPT_SRC}/s3/http.cc
  ${RCKPT_SRC}/s3/json_fields.cc
  ${RCKPT_SRC}/s3/s3_file_system.cc
  ${RCKPT_SRC}/s3/s3_reader.cc
  ${RCKPT_SRC}/s3/s3_writer.cc
  ${RCKPT_SRC}/s3/sigv4.cc
  ${RCKPT_SRC}/s3/url.cc
  ${RCKPT_SRC}/s3/xml.cc)
target_link_libraries(rckpt PRIVATE CURL::libcurl OpenSSL::Crypto pugixml::pugixml)
