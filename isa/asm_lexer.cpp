#include "isa/asm_lexer.h"

#include <cctype>

namespace tpusim::isa::asmtext {
namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

// Offset of the first byte that does not belong to well-formed UTF-8 (RFC 3629), or npos. Strings
// end up in the JSON manifest, which must be valid UTF-8.
size_t invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    size_t n = 0;                        // continuation bytes
    unsigned char lo = 0x80, hi = 0xBF;  // range of the first continuation byte
    if (b < 0x80) n = 0;
    else if (b >= 0xC2 && b <= 0xDF) n = 1;
    else if (b >= 0xE0 && b <= 0xEF) n = 2, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) n = 3, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    else return i;
    if (i + n >= s.size() && n > 0) return i;
    for (size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return i;
    }
    i += n + 1;
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    const int col = static_cast<int>(i) + 1;
    if (c == ';' || c == '#') break;
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (ident_start(c)) {
      size_t j = i;
      while (j < s.size() && ident_char(s[j])) ++j;
      out.push_back({Tok::ident, std::string(s.substr(i, j - i)), col});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      // Integers (123, 0x7f, 0b101, 1_000) and reals (0.5, 1e-3, 2.5E+2). A sign belongs to the
      // number only right after the exponent marker of a decimal literal.
      const bool hex = c == '0' && i + 1 < s.size() && (s[i + 1] == 'x' || s[i + 1] == 'X');
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_' || s[j] == '.' ||
                              ((s[j] == '+' || s[j] == '-') && !hex && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
        ++j;
      std::string text(s.substr(i, j - i));
      const bool real = !hex && text.find_first_of(".eE") != std::string::npos;
      out.push_back({real ? Tok::real : Tok::number, std::move(text), col});
      i = j;
    } else if (c == '"') {
      std::string text;
      size_t j = i + 1;
      for (;; ++j) {
        if (j >= s.size()) throw LexError{col, "unterminated string"};
        if (s[j] == '"') break;
        if (s[j] == '\\') {
          if (j + 1 >= s.size()) throw LexError{col, "unterminated string"};
          const char e = s[++j];
          if (e == 'n') text += '\n';
          else if (e == 't') text += '\t';
          else if (e == '"' || e == '\\') text += e;
          else if (e == 'x' && j + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[j + 1])) &&
                   std::isxdigit(static_cast<unsigned char>(s[j + 2]))) {
            const int byte = std::stoi(std::string(s.substr(j + 1, 2)), nullptr, 16);
            if (byte > 0x7f)
              throw LexError{static_cast<int>(j), "\\x escapes are for ASCII (\\x00 to \\x7f)"};
            text += static_cast<char>(byte);
            j += 2;
          } else throw LexError{static_cast<int>(j) + 1, std::string("unknown escape \\") + e};
        } else {
          text += s[j];
        }
      }
      if (const size_t bad = invalid_utf8(s.substr(i + 1, j - i - 1)); bad != std::string_view::npos)
        throw LexError{static_cast<int>(i + 2 + bad), "string is not valid UTF-8"};
      out.push_back({Tok::string, std::move(text), col});
      i = j + 1;
    } else if ((c == '<' || c == '>') && i + 1 < s.size() && s[i + 1] == c) {
      out.push_back({Tok::punct, std::string(2, c), col});
      i += 2;
    } else if (std::string_view("=,:()+-*/%&|~").find(c) != std::string_view::npos) {
      out.push_back({Tok::punct, std::string(1, c), col});
      ++i;
    } else {
      std::string shown = std::isprint(static_cast<unsigned char>(c))
                              ? std::string("'") + c + "'"
                              : "byte " + std::to_string(static_cast<unsigned char>(c));
      throw LexError{col, "unexpected character " + shown};
    }
  }
  out.push_back({Tok::end, "", static_cast<int>(s.size()) + 1});
  return out;
}

}  // namespace tpusim::isa::asmtext
