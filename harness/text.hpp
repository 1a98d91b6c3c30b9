// Text that came from the user or a file, made safe to print: error messages
// quote options, configuration lines and file names, and a terminal must get
// neither raw bytes of a binary file nor escape sequences from them.
#pragma once
#include <string>
#include <string_view>

namespace attn {

// `text` with well-formed UTF-8 kept as it is and every other byte (a control
// character, a byte that is no part of a UTF-8 character) written as \xNN.
std::string printable(std::string_view text);

// Whether printable(text) == text: well-formed UTF-8 without control characters.
bool is_printable(std::string_view text);

// `text` as a JSON string, quotes included: " and \ escaped, control
// characters (C0, DEL, C1) as \n, \t, ... or \u00XX, other UTF-8 kept as it is,
// and a byte of no UTF-8 character as the text \xNN (as printable shows it).
std::string json_string(std::string_view text);

// An axis's value in a printed table: "-" for 0, not a parameter of the form.
std::string axis_text(int value);

}  // namespace attn
