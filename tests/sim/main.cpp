// The simulator's Catch2 runner. libsystemc provides main() and calls sc_main(), so the test
// binary starts Catch from sc_main (BUILD-NOTES.md).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <systemc>

int sc_main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
