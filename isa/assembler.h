// Text assembly -> Program. Syntax reference: docs/assembly.md.
//
//   ; comments start with ';' or '#'
//   .equ  N, 8                        ; named constants (expressions: + - * / % << >> & | ~ ( ))
//   .ub   x, 0, N                     ; a named UB region: row address and rows
//   start: rhm host=0x0, ub=x, rows=N ; instructions take name=value operands and bare flags
//
// Errors are collected and reported together as "file:line:column: error: message".
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "isa/program.h"

namespace tpusim::isa {

// Every directive the assembler knows (docs/assembly.md describes each).
inline constexpr std::string_view kDirectives[] = {".model", ".arch",    ".meta",   ".equ",   ".ub",
                                                   ".acc",   ".weights", ".wimage", ".input", ".output"};

// `source_name` is used in messages; `base_dir` resolves file("...") paths.
Program assemble(std::string_view text, const std::string& source_name,
                 const std::filesystem::path& base_dir = ".");

Program assemble_file(const std::filesystem::path& path);  // throws InputError

// Deterministic fill used by init=random(SEED): byte i of a region is the top byte of the i-th
// output of splitmix64 started at state SEED (so values are uniform over 0..255, i.e. over
// int8 -128..127 when read signed).
void fill_random(std::span<uint8_t> out, uint64_t seed);

}  // namespace tpusim::isa
