#include "isa/asm_lexer.h"

#include <cctype>

namespace tpusim::isa::asmtext {
namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

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
      size_t j = i;
      bool real = false;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_' ||
                              s[j] == '.' || ((s[j] == '+' || s[j] == '-') && real &&
                                              (s[j - 1] == 'e' || s[j - 1] == 'E')))) {
        if (s[j] == '.') real = true;
        ++j;
      }
      std::string text(s.substr(i, j - i));
      const bool hex = text.size() > 1 && (text[1] == 'x' || text[1] == 'X');
      if (!hex && (text.find('e') != std::string::npos || text.find('E') != std::string::npos))
        real = true;
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
          else throw LexError{static_cast<int>(j) + 1, std::string("unknown escape \\") + e};
        } else {
          text += s[j];
        }
      }
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
