// Emits pickle protocol 2 using only the opcodes torch's weights-only
// unpickler accepts (section 3.2 of the PyTorch format notes).
#ifndef RCKPT_SRC_CONVERT_PICKLE_WRITER_H_
#define RCKPT_SRC_CONVERT_PICKLE_WRITER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace rckpt::convert {

class PickleWriter {
 public:
  PickleWriter() { Op(0x80); Op(2); }

  void Op(uint8_t op) { out_.push_back(static_cast<char>(op)); }
  void Mark() { Op('('); }
  void None() { Op('N'); }
  void Bool(bool b) { Op(b ? 0x88 : 0x89); }
  void Int(int64_t v);
  // A Python int from little-endian two's complement bytes (LONG1/LONG4).
  void BigInt(std::string_view le_bytes);
  void Float(double d);
  void Str(std::string_view utf8);
  // bytes, as _codecs.encode(latin-1 text, 'latin1') (protocol 2 has no bytes).
  void Bytes(std::string_view bytes);
  // GLOBAL module\nname\n, memoised: later uses are BINGETs.
  void Global(const std::string& module, const std::string& name);
  // Stores the top of the stack in the memo; returns the index.
  uint32_t Put();
  void Get(uint32_t index);
  void Stop() { Op('.'); }

  const std::string& str() const { return out_; }

 private:
  std::string out_;
  uint32_t next_memo_ = 0;
  std::map<std::string, uint32_t> globals_;
};

}  // namespace rckpt::convert

#endif  // RCKPT_SRC_CONVERT_PICKLE_WRITER_H_
