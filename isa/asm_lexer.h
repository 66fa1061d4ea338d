// Tokens of one assembly line, with 1-based columns for error messages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tpusim::isa::asmtext {

enum class Tok { ident, number, real, string, punct, end };

struct Token {
  Tok kind;
  std::string text;  // identifier, literal text, decoded string, or the punctuation itself
  int col;           // 1-based
};

// Throws LexError on a bad character, an unterminated string or a malformed number.
struct LexError {
  int col;
  std::string message;
};

std::vector<Token> tokenize(std::string_view line);

}  // namespace tpusim::isa::asmtext
