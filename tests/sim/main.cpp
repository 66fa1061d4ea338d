// The simulator's Catch2 runner. libsystemc provides main() and calls sc_main(), so the test
// binary starts Catch from sc_main (BUILD-NOTES.md).
// GCC 12 with ASan reports a false maybe-uninitialized inside <regex>, which the Catch runner
// pulls in; the warning is about libstdc++, not our code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <systemc>

int sc_main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
