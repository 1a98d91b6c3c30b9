#include "text.hpp"

#include <fmt/format.h>

namespace attn {
namespace {

// Bytes of the well-formed UTF-8 character at text[i] that is not a control
// character (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF); 0 when there is none.
std::size_t printable_character(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) {
    return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u;
  };
  const unsigned lead = byte(0);
  if (lead < 0x80) return lead >= 0x20 && lead != 0x7f ? 1 : 0;
  std::size_t length = 0;
  unsigned low = 0x80, high = 0xbf;  // the range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf)
    length = 2;
  else if (lead >= 0xe0 && lead <= 0xef)
    length = 3, low = lead == 0xe0 ? 0xa0 : 0x80, high = lead == 0xed ? 0x9f : 0xbf;
  else if (lead >= 0xf0 && lead <= 0xf4)
    length = 4, low = lead == 0xf0 ? 0x90 : 0x80, high = lead == 0xf4 ? 0x8f : 0xbf;
  else
    return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xbf) return 0;
  // C1 control characters, U+0080 to U+009F.
  return lead == 0xc2 && byte(1) < 0xa0 ? 0 : length;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (const std::size_t n = printable_character(text, i)) {
      out.append(text, i, n);
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i++]));
    }
  }
  return out;
}

bool is_printable(std::string_view text) { return printable(text) == text; }

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (const std::size_t n = printable_character(text, i)) {
      if (byte == '"' || byte == '\\') out += '\\';
      out.append(text, i, n);
      i += n;
      continue;
    }
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0u;
    if (byte == 0xc2 && next >= 0x80 && next < 0xa0) {  // a C1 control character, U+0080 to U+009F
      out += fmt::format("\\u{:04x}", next);
      i += 2;
      continue;
    }
    switch (byte) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        out += byte < 0x80 ? fmt::format("\\u{:04x}", byte) : fmt::format("\\\\x{:02x}", byte);
    }
    ++i;
  }
  return out + '"';
}

std::string axis_text(int value) { return value ? std::to_string(value) : "-"; }

}  // namespace attn
