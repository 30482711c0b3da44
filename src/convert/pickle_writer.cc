#include "convert/pickle_writer.h"

#include <cstring>

#include "convert/bytes.h"

namespace rckpt::convert {

void PickleWriter::Int(int64_t v) {
  if (v >= 0 && v < 256) {
    Op('K');
    AppendLE(&out_, v, 1);
  } else if (v >= 0 && v < 65536) {
    Op('M');
    AppendLE(&out_, v, 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    Op('J');
    AppendLE(&out_, static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
  } else {
    Op(0x8a);
    Op(8);
    AppendLE(&out_, static_cast<uint64_t>(v), 8);
  }
}

void PickleWriter::BigInt(std::string_view le) {
  if (le.size() < 256) {
    Op(0x8a);
    Op(static_cast<uint8_t>(le.size()));
  } else {
    Op(0x8b);
    AppendLE(&out_, le.size(), 4);
  }
  out_.append(le);
}

void PickleWriter::Float(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  Op('G');
  for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void PickleWriter::Str(std::string_view s) {
  Op('X');
  AppendLE(&out_, s.size(), 4);
  out_.append(s);
}

void PickleWriter::Bytes(std::string_view b) {
  Global("_codecs", "encode");
  std::string latin1;  // each byte as one code point, UTF-8 encoded
  latin1.reserve(b.size() * 2);
  for (char c : b) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80) {
      latin1.push_back(static_cast<char>(u));
    } else {
      latin1.push_back(static_cast<char>(0xc0 | (u >> 6)));
      latin1.push_back(static_cast<char>(0x80 | (u & 0x3f)));
    }
  }
  Str(latin1);
  Str("latin1");
  Op(0x86);  // TUPLE2
  Op('R');
}

void PickleWriter::Global(const std::string& module, const std::string& name) {
  std::string key = module + "\n" + name;
  if (auto it = globals_.find(key); it != globals_.end()) {
    Get(it->second);
    return;
  }
  Op('c');
  out_ += module;
  out_ += '\n';
  out_ += name;
  out_ += '\n';
  globals_[key] = Put();
}

uint32_t PickleWriter::Put() {
  uint32_t i = next_memo_++;
  if (i < 256) {
    Op('q');
    AppendLE(&out_, i, 1);
  } else {
    Op('r');
    AppendLE(&out_, i, 4);
  }
  return i;
}

void PickleWriter::Get(uint32_t i) {
  if (i < 256) {
    Op('h');
    AppendLE(&out_, i, 1);
  } else {
    Op('j');
    AppendLE(&out_, i, 4);
  }
}

}  // namespace rckpt::convert
