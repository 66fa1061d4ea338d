// Errors a user can act on. The message already carries where (file:line:column, instruction
// index or byte offset) and what was expected; the CLI prints it and exits with code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace tpusim {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tpusim
